#!/usr/bin/env bash
# Makes docs/status-orders.png, orders' status page during a billing outage,
# the screenshot in the README and docs/status.md: it starts the example pair
# as `make run` does (scripts/run-examples.sh, in a directory of its own),
# places an order (one sku-7), stops billing, calls orders until its breaker on
# billing opens, and has headless Chromium (scripts/install-chromium.sh)
# capture http://127.0.0.1:9000/status. Needs the machine's PostgreSQL and
# Redis, and ports 8000, 8010, 9000 and 9010 free. Usage:
#   bash scripts/screenshot-status.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/status-orders.png}
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome) || {
  echo "screenshot-status: no chromium; run scripts/install-chromium.sh" >&2
  exit 1
}
export JFAST_EXAMPLES_DIR=${JFAST_EXAMPLES_DIR:-$(mktemp -d /tmp/jfast-screenshot.XXXXXX)}
log=$JFAST_EXAMPLES_DIR/run.log
setsid bash scripts/run-examples.sh >"$log" 2>&1 &
run=$!
trap 'kill -TERM -- -"$run" 2>/dev/null || true; wait "$run" 2>/dev/null || true' EXIT
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for ((i = 0; i < 300; i++)); do port_open 9000 && port_open 8010 && break; sleep 0.5; done
port_open 9000 || { cat "$log" >&2; exit 1; }

token=$("$JFAST_EXAMPLES_DIR/bin/orders" token ada)
auth=(-H "Authorization: Bearer $token")
id=$(curl -fsS localhost:8000/orders "${auth[@]}" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: screenshot-$RANDOM$RANDOM" -d '{"sku":"sku-7","quantity":1,"email":"ada@example.com"}' | sed -E 's/^\{"id":([0-9]+).*/\1/')
for ((i = 0; i < 5; i++)); do curl -fsS -o /dev/null localhost:8000/orders/"$id" "${auth[@]}"; done

# Chromium's first start is slow on a busy machine: start it once before the
# outage, so the capture follows the breaker's opening closely.
"$chrome" --headless --no-sandbox --disable-gpu --screenshot=/dev/null about:blank >/dev/null 2>&1 || true

# The outage: billing stops; orders' reads of the invoice fail until its
# breaker opens (breaker_failures = 5), then answer 503 at once.
billing=$(ss -Hltnp 'sport = :8010' | sed -nE 's/.*pid=([0-9]+).*/\1/p' | head -1)
kill -TERM "$billing"
for ((i = 0; i < 50; i++)); do
  curl -s -o /dev/null localhost:8000/orders/"$id" "${auth[@]}"
  curl -s localhost:9000/ready | grep -q "calls to 'billing' are suspended for" && break
  sleep 0.2
done
if ! curl -s localhost:9000/ready | grep -q "calls to 'billing' are suspended for"; then
  echo "screenshot-status: orders' breaker on billing did not open; nothing written" >&2
  exit 1
fi
"$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,1650 \
  --screenshot="$out" http://127.0.0.1:9000/status >/dev/null 2>&1
echo "wrote $out"
