"""tlib/tls.py: certificates made by the openssl command, for the tests of
MQTT over TLS.

    Certs(dir)                   a directory of PEM files: make_ca(name),
                                 sign(cn, ca, san=..., days=...)
"""
import os
import subprocess


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60, cwd=cwd)


class Certs:
    """PEM files in one directory: CAs (make_ca) and what they sign (sign).
    Keys are EC P-256, unencrypted; certificates are valid for 2 days."""

    def __init__(self, d):
        self.dir = d

    def path(self, name):
        return os.path.join(self.dir, name)

    def make_ca(self, name):
        """A self-signed CA, name.pem / name.key; returns the certificate's path."""
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN=Tributary test {name}",
                cwd=self.dir)
        return self.path(f"{name}.pem")

    def sign(self, cn, ca, san=None, days="2"):
        """(cert, key) of CN cn signed by ca; days -1 makes it expired already."""
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{cn}.key",
                "-out", f"{cn}.csr", "-subj", f"/CN={cn}", cwd=self.dir)
        ext = []
        if san:
            with open(self.path(f"{cn}.ext"), "w") as f:
                f.write(f"subjectAltName={san}\n")
            ext = ["-extfile", f"{cn}.ext"]
        openssl("x509", "-req", "-in", f"{cn}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", f"{cn}.pem", "-days", days, *ext, cwd=self.dir)
        return self.path(f"{cn}.pem"), self.path(f"{cn}.key")
