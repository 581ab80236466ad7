"""Print one closing line for a meson test run: 'DIR: N passed, N failed'.

Reads DIR/meson-logs/testlog.json (one JSON object a line) and exits 1 when
any test failed, timed out or no test ran, so a caller can rely on it."""
import json
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
passed = failed = skipped = 0
with open(f"{build}/meson-logs/testlog.json", encoding="utf-8") as log:
    for line in log:
        result = json.loads(line)["result"]
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{build}: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or passed == 0 else 0)
