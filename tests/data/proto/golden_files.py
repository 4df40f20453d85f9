"""golden_files: how make_golden.py and make_spb_golden.py keep a golden file.

With check, the file must hold exactly data (1 is returned when it does not);
without, data is written. Either way a line says what happened."""


def write_or_check(path, data, check):
    if check:
        with open(path, "rb") as f:
            if f.read() != data:
                print(f"{path}: differs from a fresh encoding")
                return 1
        return 0
    with open(path, "wb") as f:
        f.write(data)
    print(f"wrote {path} ({len(data)} bytes)")
    return 0
