/*
 * helper_lsan.c: Criterion 2.4.1's parallel runner (the parent process,
 * not the tests) sometimes leaks one 48-byte allocation when two test
 * processes finish close together: the leak is inside libcriterion
 * (criterion_run_all_tests -> libcriterion internals), appears only with
 * --jobs > 1, and varies with timing. LeakSanitizer reads this hook at
 * start-up; suppressing leaks whose stack lies in libcriterion keeps the
 * sanitizer build strict about everything of ours. Without sanitizers the
 * function is never called.
 */
const char *__lsan_default_suppressions(void);

const char *__lsan_default_suppressions(void)
{
    return "leak:libcriterion.so\n";
}
