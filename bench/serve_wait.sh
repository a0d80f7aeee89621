# Sourced by bench/serve_cpu.sh and bench/serve_h200.sh.
# wait_ready URL SECONDS PID: 0 once URL answers, 1 if the server (PID) exits or SECONDS pass.
wait_ready() {
    for _ in $(seq "$2"); do
        curl -sf "$1" >/dev/null && return 0
        kill -0 "$3" 2>/dev/null || return 1
        sleep 1
    done
    return 1
}
