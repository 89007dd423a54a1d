#!/bin/sh
# A screenshot of an `agent eval --html` report, taken with headless Chromium (not needed by the tests or CI).
#
#   bench/screenshot_report.sh report.html docs/eval-report.png [WIDTH] [HEIGHT]
#
# The page is copied first with one task opened and moved to the top of "Tasks": the first whose arms
# disagree (some runs pass, some fail), its failed runs' transcripts unfolded, so the picture shows why an arm
# failed. With Pillow installed, the PNG is then reduced to 96 colours (text stays sharp, the file small).
# Chromium: `apt-get install -y chromium` (Debian), or set CHROMIUM to the browser's path.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 REPORT.html OUT.png [WIDTH] [HEIGHT]" >&2
    exit 2
fi
report=$1 out=$2 width=${3:-1300} height=${4:-2000}
python=${PYTHON:-python3}
browser=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [ -z "$browser" ]; then
    echo "$0: no Chromium found: apt-get install -y chromium, or set CHROMIUM=/path/to/chrome" >&2
    exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" - "$report" "$work/page.html" <<'EOF'
import sys

page = open(sys.argv[1], encoding="utf-8").read()
start = '<details class="task">'
head, *tasks = page.split(start)
if tasks:
    tasks[-1], tail = tasks[-1].split("\n</body>", 1)
    mixed = [t for t in tasks if 'class="fail">FAIL' in t and 'class="pass">pass' in t]
    failing = [t for t in tasks if 'class="fail">FAIL' in t]
    chosen = (mixed or failing or tasks)[0]
    runs = chosen.split('<details class="run">')
    opened = runs[0] + "".join(('<details class="run" open>' if 'class="fail">FAIL' in r.split("</summary>")[0]
                                else '<details class="run">') + r for r in runs[1:])
    tasks.remove(chosen)
    page = head + '<details class="task" open>' + opened + "".join(start + t for t in tasks) + "\n</body>" + tail
open(sys.argv[2], "w", encoding="utf-8").write(page)
EOF

"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$work/profile" \
    --force-device-scale-factor=1 --window-size="$width,$height" --screenshot="$out" "file://$work/page.html" \
    >"$work/chromium.log" 2>&1 || { cat "$work/chromium.log" >&2; exit 1; }

"$python" - "$out" <<'EOF' || true
import sys

try:
    from PIL import Image
except ImportError:
    sys.exit(0)
Image.open(sys.argv[1]).convert("RGB").quantize(colors=96).save(sys.argv[1], optimize=True)
EOF
echo "$out: $(wc -c <"$out") bytes"
