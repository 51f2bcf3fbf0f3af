"""Holds franz-go's kgo test runs (go test2json streams) against franz_go_kgo_tests.tsv.

Usage: franz_go_verdict.py LIST MAIN_JSON LISTED_FAILURES_JSON MATRIX_TSV

MAIN_JSON is the run of every test but the listed failures, LISTED_FAILURES_JSON the run of
those alone (some never end when they fail, so that run has a deadline). Every listed test
must end as listed (a fail or skip with its text in its output); every other test, and every
subtest of a test that is not a listed failure, must pass. Writes the client-matrix rows
(one for the suite's passing tests, one per scenario its listed tests need or show
working), prints a
summary, and exits 1 with each mismatch named.
"""

import collections
import json
import sys

# A failing test can log once per record (TestTxnEtl did: two lines for each of its records);
# the expected text comes first, so this much of each test's output is enough to find it.
KEPT_OUTPUT_LINES = 400
SHOWN_OUTPUT_CHARS = 2000
VERB = {"pass": "passes", "fail": "fails", "skip": "is skipped"}


def load_list(path):
    listed = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            fields = line.split("\t")
            if fields[1:] == ["pass"]:
                listed[fields[0]] = ("pass", "", "", "")
            elif len(fields) == 3 and fields[1] == "pass" and fields[2]:
                # A pass that shows a scenario of the matrix working: its row, noted.
                listed[fields[0]] = ("pass", fields[2], f"{fields[0]} passes", "")
            elif len(fields) == 5 and fields[1] in ("fail", "skip") and all(fields):
                listed[fields[0]] = tuple(fields[1:])
            else:
                sys.exit(f"{path}:{number}: expected 'TEST\\tpass', 'TEST\\tpass\\tSCENARIO' "
                         "or 'TEST\\tfail|skip\\tSCENARIO\\tWHY\\tTEXT'")
    return listed


def load_run(path):
    """Each test's (and subtest's) final action and the start of its output; under the key
    None the last lines outside any test (where a crash of the binary shows)."""
    outcome, output = {}, {None: collections.deque(maxlen=KEPT_OUTPUT_LINES)}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # the test binary's own lines outside any test, e.g. a build note
            test = event.get("Test")
            action = event.get("Action")
            if not test:
                if action == "output":
                    output[None].append(event.get("Output", ""))
                continue
            if action in ("pass", "fail", "skip"):
                outcome[test] = action
            elif action == "output":
                lines = output.setdefault(test, [])
                if len(lines) < KEPT_OUTPUT_LINES:
                    lines.append(event.get("Output", ""))
    return outcome, output


def main():
    list_path, main_path, failures_path, matrix_path = sys.argv[1:5]
    listed = load_list(list_path)
    main_outcome, main_output = load_run(main_path)
    failures_outcome, failures_output = load_run(failures_path)
    listed_failures = {t for t, (expected, *_) in listed.items() if expected == "fail"}

    problems, rows = [], []
    for test, (expected, scenario, why, text) in listed.items():
        in_failures_run = test in listed_failures
        outcome = (failures_outcome if in_failures_run else main_outcome).get(test)
        output = "".join((failures_output if in_failures_run else main_output).get(test, []))
        if outcome is None:
            run_output = failures_output if in_failures_run else main_output
            run_end = "".join(run_output[None]).strip()[-SHOWN_OUTPUT_CHARS:]
            problems.append(f"{test}: did not run (not a test of this franz-go?)"
                            + (f"; the run ended with:\n{run_end}" if run_end else ""))
            rows.append((test, "fail", "did not run", scenario))
        elif outcome != expected:
            if expected == "pass":
                problems.append(f"{test}: {VERB[outcome]}, expected to pass:\n"
                                f"{output.strip()[:SHOWN_OUTPUT_CHARS]}")
            else:
                problems.append(f"{test}: {VERB[outcome]}, listed as {expected} ({why}): "
                                "update its line in the list")
            rows.append((test, "pass" if outcome == "pass" else "fail", why or "expected to pass",
                         scenario))
        elif expected != "pass" and text not in output:
            problems.append(f"{test}: {VERB[outcome]}, but not with \"{text}\" ({why}):\n"
                            f"{output.strip()[:SHOWN_OUTPUT_CHARS]}")
            rows.append((test, "fail", f"{VERB[expected]} for another reason than: {why}",
                         scenario))
        else:
            rows.append((test, "pass" if expected == "pass" else "unsupported", why, scenario))

    def belongs_to_listed_failure(test):
        return test.split("/")[0] in listed_failures

    unit_passed, unlisted_failed = 0, False
    for test, outcome in sorted(main_outcome.items()):
        if test in listed or belongs_to_listed_failure(test):
            continue
        if outcome != "pass":
            unlisted_failed = True
            problems.append(f"{test}: {VERB[outcome]} and is not listed:\n"
                            f"{''.join(main_output.get(test, [])).strip()[:SHOWN_OUTPUT_CHARS]}")
        elif "/" not in test:
            unit_passed += 1

    # The matrix compares clients by scenario, so the suite is one row (its listed tests
    # aside) and each listed test counts towards the scenario it needs: a test that fails
    # unlisted fails the suite's row, a listed one that no longer ends as listed its own.
    scenarios = {"kgo-integration-tests": "fail" if unlisted_failed else "pass"}
    notes = {"kgo-integration-tests": ""}
    for test, result, note, scenario in rows:
        if scenario:
            if scenario not in scenarios or result == "fail":
                scenarios[scenario] = result
                notes[scenario] = note
        elif result == "fail":
            scenarios["kgo-integration-tests"] = "fail"
    with open(matrix_path, "a", encoding="utf-8") as matrix:
        for scenario, result in scenarios.items():
            matrix.write(f"{scenario}\t{result}\t{notes[scenario]}\n")

    top_level = [r for r in rows if "/" not in r[0]]
    passed = sum(1 for r in top_level if r[1] == "pass")
    print(f"franz-go kgo: {passed} of {len(top_level)} integration tests pass, "
          f"{sum(1 for r in top_level if r[1] == 'unsupported')} need what kpfs lacks; "
          f"{unit_passed} other tests pass")
    for test, result, note, _ in rows:
        if result != "pass":
            print(f"  {test}: {result}: {note}")
    if problems:
        for problem in problems:
            print(f"FAIL: {problem}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
