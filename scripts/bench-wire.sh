# shellcheck shell=bash
# The wire scenarios of scripts/bench (issue 15): real Kafka clients against `kpfs serve`,
# each beside the wire floor (examples/wire_floor.rs: the listener's framing and threads
# over no storage) in the same run. Sourced by scripts/bench after bench-lib.sh; uses its
# helpers, $B, $QUICK and $ROUNDS.
#
# The clients: kcat (librdkafka) for throughput, a C client whose per-record cost is the
# lowest at hand (confluent-kafka's Python loop costs about twice kcat's CPU per record);
# confluent-kafka for latency (scripts/bench-wire-latency.py), which needs two processes
# and a clock in the record.

WIRE_FLOOR=target/release/examples/wire_floor
# Value bytes of every record (a line of 101 bytes without its newline), Kafka's
# published single-producer figure's size.
WIRE_RECORD_BYTES=100
# kcat -P: batches as large as librdkafka makes them (batch.size's 1,000,000 bytes, under
# max.message.bytes), 50 ms to fill them, and a queue deep enough that reading standard
# input never waits for the network.
WIRE_PRODUCER=(-X linger.ms=50 -X batch.size=1000000 -X queue.buffering.max.messages=1000000
    -X queue.buffering.max.kbytes=2097151)
# kcat -C: 4 MiB fetches. librdkafka 2.0 stops fetching while its queue holds more than
# queued.min.messages and looks again only a second later: the bounds are raised so that
# a consumer never waits on its own queue.
WIRE_CONSUMER=(-X fetch.message.max.bytes=4194304 -X queued.min.messages=10000000
    -X queued.max.messages.kbytes=2097151)
# A consumer that has not received every record by then is broken, not slow.
WIRE_DEADLINE_S=600

wire_sizes() {
    if $QUICK; then
        WIRE_BYTES=$((16 << 20))       # one producer, then one consumer
        WIRE_LATENCY_RECORDS=200       # at WIRE_LATENCY_RATE a second
        WIRE_TOPIC_BYTES=$((2 << 20))  # per producer of WIRE_TOPICS
    else
        WIRE_BYTES=$((1 << 30))
        WIRE_LATENCY_RECORDS=10000
        WIRE_TOPIC_BYTES=$((128 << 20))
    fi
    WIRE_LATENCY_RATE=1000
    WIRE_TOPICS=8
}

# wire_records BYTES: how many records an input of BYTES holds.
wire_records() { echo $(($1 / (WIRE_RECORD_BYTES + 1))); }

# The servers are started by the scenario's own shell, never inside $(...): a server
# there would outlive its parent shell, and after a kill stay a zombie until init reaps
# it (about a second here) rather than at once through `wait`.

# wire_floor_start DIR: the wire floor on a free loopback port, written to DIR/port.
wire_floor_start() {
    local dir=$1
    mkdir -p "$dir"
    rm -f "$dir/floor.port"
    "$WIRE_FLOOR" 127.0.0.1:0 "$dir/floor.port" >/dev/null 2>>"$dir/floor.log" &
    echo "$!" >>"$B/pids"
    echo "$!" >"$dir/server.pid"
    wait_for 30 "the wire floor to listen" test -s "$dir/floor.port"
    cp "$dir/floor.port" "$dir/port"
}

# kpfs_serve_up LOG PID: the listener logged its start, or the server is gone.
kpfs_serve_up() { grep -q 'Kafka listener started' "$1" || ! kill -0 "$2" 2>/dev/null; }

# wire_kpfs_start DIR [ARGS...]: `kpfs serve` of DIR/data (with ARGS, e.g. overrides) on
# a free loopback port, written to DIR/port.
# A port found free can be taken before kpfs binds it: then another one is tried.
wire_kpfs_start() {
    local dir=$1 port pid try
    shift
    mkdir -p "$dir"
    for try in 1 2 3 4 5; do
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        : >"$dir/serve.log"
        # One segment holds a whole run: a roll would start Kafka's fsync of the rolled
        # segment in the background, into the next measurement.
        "$KPFS" serve --data-dir "$dir/data" --override "listeners=PLAINTEXT://127.0.0.1:$port" \
            --override log.segment.bytes=2147483647 "$@" >/dev/null 2>>"$dir/serve.log" &
        pid=$!
        echo "$pid" >>"$B/pids"
        echo "$pid" >"$dir/server.pid"
        wait_for 30 "kpfs serve to listen" kpfs_serve_up "$dir/serve.log" "$pid"
        if kill -0 "$pid" 2>/dev/null; then
            echo "$port" >"$dir/port"
            return 0
        fi
        log "bench: kpfs serve on port $port failed (try $try): $(tail -n 1 "$dir/serve.log")"
    done
    return 1
}

# wire_stop DIR: stops DIR's server (either one) and removes its data. kpfs gets SIGKILL,
# not SIGTERM: a clean shutdown fsyncs what it wrote, and that writeback would slow the
# steps after it (see `elapsed`); the data is deleted unwritten instead.
wire_stop() {
    local pid
    pid=$(cat "$1/server.pid")
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$1/data"
}

# cpu_s PID: the process's user and system CPU seconds so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }

# wire_timed OUT CMD...: CMD's wall seconds on stdout; its CPU seconds (its children's
# user and system time, from `times`) in OUT.
wire_timed() {
    local out=$1 t0 t1
    shift
    t0=$(date +%s%N)
    (
        "$@" >&2
        # Not in a pipeline: that would run `times` in a child of its own.
        times >"$out.times"
    )
    awk 'NR == 2 { split($0, f, /[ ms]+/); print f[1] * 60 + f[2] + f[3] * 60 + f[4] }' \
        "$out.times" >"$out"
    t1=$(date +%s%N)
    calc "($t1 - $t0) / 1e9" 6
}

produce_file() { # PORT TOPIC FILE: kcat -P of FILE's lines, one record each
    kcat -b "127.0.0.1:$1" -P -t "$2" "${WIRE_PRODUCER[@]}" <"$3"
}

# consume_all PORT TOPIC N OUT: kcat -C of the topic's first N records from the
# beginning; the last record's offset goes to OUT (N - 1 when all came, in order).
consume_all() {
    timeout "$WIRE_DEADLINE_S" kcat -b "127.0.0.1:$1" -C -t "$2" -o beginning -c "$3" -f '%o\n' \
        "${WIRE_CONSUMER[@]}" | tail -n 1 >"$4"
}

# expect_last_offset FILE N: fails the scenario unless FILE says N - 1.
expect_last_offset() {
    if [ "$(cat "$1")" != $(($2 - 1)) ]; then
        log "bench: a consumer's last offset is '$(cat "$1")', expected $(($2 - 1))"
        return 1
    fi
}

# wire_round SETUP DIR IN N: one producer sends IN to a new topic of SETUP's server
# (floor or kpfs), then one consumer fetches it all from the beginning. Appends to
# DIR/SETUP.rows: produce seconds, fetch seconds, client CPU seconds of each, and server
# CPU seconds of each.
wire_round() {
    local setup=$1 dir=$2/$1 in=$3 n=$4 port pid s0 s1 s2 pw pr
    "wire_${setup}_start" "$dir"
    port=$(cat "$dir/port") pid=$(cat "$dir/server.pid")
    s0=$(cpu_s "$pid")
    pw=$(wire_timed "$dir/cpu_w" produce_file "$port" stream "$in")
    s1=$(cpu_s "$pid")
    pr=$(wire_timed "$dir/cpu_r" consume_all "$port" stream "$n" "$dir/last")
    s2=$(cpu_s "$pid")
    expect_last_offset "$dir/last" "$n"
    if [ "$setup" = kpfs ]; then
        echo "$(proc_kib "$pid" VmHWM) $(proc_kib "$pid" RssAnon)" >"$2/kpfs_memory"
    fi
    wire_stop "$dir"
    echo "$pw $pr $(cat "$dir/cpu_w") $(cat "$dir/cpu_r") $(calc "$s1 - $s0" 2) $(calc "$s2 - $s1" 2)" \
        >>"$2/$setup.rows"
    log "  $setup: produce ${pw}s, fetch ${pr}s"
}

# wire_best DIR SETUP COLUMN: the least of a column of DIR/SETUP.rows (1 produce, 2 fetch).
wire_best() { awk -v c="$3" '{ print $c }' "$1/$2.rows" | sort -g | head -n 1; }
# wire_of_best DIR SETUP BY COLUMN: column COLUMN of the row whose column BY is the least.
wire_of_best() { sort -g -k "$3,$3" "$1/$2.rows" | head -n 1 | awk -v c="$4" '{ print $c }'; }

# Wire scenarios W1 and W2: one producer sends WIRE_BYTES of 100-byte records (kcat -P),
# then one consumer fetches them all from the beginning (kcat -C), against the floor and
# kpfs in turn (the floor first in odd rounds), ROUNDS rounds, each figure the best of
# its rounds.
scenario_wire_stream() {
    wire_sizes
    local dir=$B/wire_stream in n r
    in=$(input_file "$WIRE_BYTES" $((WIRE_RECORD_BYTES + 1)))
    n=$(wire_records "$(stat -c %s "$in")")
    mkdir -p "$dir"
    sync
    local -a order
    for ((r = 1; r <= ROUNDS; r++)); do
        # Each setup goes first in some rounds: what the one before leaves behind (its
        # dirty pages, memory just freed) then weighs on both.
        order=(floor kpfs)
        if ((r % 2 == 0)); then order=(kpfs floor); fi
        log "round $r of $ROUNDS: ${order[*]}: kcat -P $n records, kcat -C them"
        wire_round "${order[0]}" "$dir" "$in" "$n"
        wire_round "${order[1]}" "$dir" "$in" "$n"
    done
    local mb k f kr fr
    mb=$(calc "$n * $WIRE_RECORD_BYTES / 1e6" 6)
    # client_share SETUP STEP: the client's CPU over its wall time in the best round.
    client_share() { calc "100 * $(wire_of_best "$dir" "$1" "$2" $(($2 + 2))) / $(wire_best "$dir" "$1" "$2")" 0; }
    server_cpu() { wire_of_best "$dir" "$1" "$2" $(($2 + 4)); }
    k=$(calc "$mb / $(wire_best "$dir" kpfs 1)") f=$(calc "$mb / $(wire_best "$dir" floor 1)")
    row "W1 one producer MB/s, kcat -P, $(size "$WIRE_BYTES") of 100-byte records$(rounds)" "$k" \
        "$f floor (kcat CPU: $(client_share kpfs 1)% / $(client_share floor 1)%)" \
        "$(calc "100 * $k / $f" 0)%" ">= 80% of floor" "$(verdict "$k >= 0.8 * $f")"
    kr=$(calc "$n / $(wire_best "$dir" kpfs 1)" 0) fr=$(calc "$n / $(wire_best "$dir" floor 1)" 0)
    row "W1 one producer records/s" "$kr" "$fr floor" "$(calc "100 * $kr / $fr" 0)%" ">= 1,000,000" \
        "$(verdict "$kr >= 1000000")"
    k=$(calc "$mb / $(wire_best "$dir" kpfs 2)") f=$(calc "$mb / $(wire_best "$dir" floor 2)")
    row "W2 one consumer MB/s from the beginning, kcat -C$(rounds)" "$k" \
        "$f floor (kcat CPU: $(client_share kpfs 2)% / $(client_share floor 2)%)" \
        "$(calc "100 * $k / $f" 0)%" ">= 80% of floor" "$(verdict "$k >= 0.8 * $f")"
    row "W1,W2 server CPU s, produce / fetch (best rounds)" "$(server_cpu kpfs 1) / $(server_cpu kpfs 2)" \
        "$(server_cpu floor 1) / $(server_cpu floor 2) floor" "-" "-" "info"
    # Mapped index and segment pages count as resident: the anonymous part is the
    # server's own memory.
    local -a memory
    read -r -a memory <"$dir/kpfs_memory"
    row "W1,W2 kpfs serve peak RSS (VmHWM), MiB (anonymous at the end)" \
        "$(mib $((memory[0] * 1024))) ($(mib $((memory[1] * 1024))))" "-" "-" "-" "info"
}

# latency_figures PORT: bench-wire-latency.py's p50 and p99 through the server at PORT.
latency_figures() {
    "$WIRE_PYTHON" scripts/bench-wire-latency.py "127.0.0.1:$1" latency "$WIRE_LATENCY_RECORDS" \
        "$WIRE_LATENCY_RATE" | awk '{ v[$1] = $2 } END { print v["p50_ms:"], v["p99_ms:"] }'
}

# Wire scenario W3: end-to-end latency, produce (acks=1) to the consumer receiving the
# record, at WIRE_LATENCY_RATE records a second, against the floor and kpfs in turn.
scenario_wire_latency() {
    wire_sizes
    local dir=$B/wire_latency port
    WIRE_PYTHON=$(scripts/python-venv)
    local -a k f
    local figures
    # Assigned first: a failure of the client then fails the scenario (a here-string
    # of a failed command substitution would just read nothing).
    wire_floor_start "$dir/floor"
    port=$(cat "$dir/floor/port")
    figures=$(latency_figures "$port")
    read -r -a f <<<"$figures"
    wire_stop "$dir/floor"
    wire_kpfs_start "$dir/kpfs"
    port=$(cat "$dir/kpfs/port")
    figures=$(latency_figures "$port")
    read -r -a k <<<"$figures"
    wire_stop "$dir/kpfs"
    row "W3 end-to-end latency p50/p99 ms, acks=1, $WIRE_LATENCY_RATE records/s, $WIRE_LATENCY_RECORDS records" \
        "${k[0]}/${k[1]}" "${f[0]}/${f[1]} floor" "-" "p99 < 10" "$(verdict "${k[1]} < 10")"
}

# wire_topics_run SETUP DIR IN N: WIRE_TOPICS producers (kcat -P of IN, a topic each) and
# as many consumers (kcat -C of each topic from the beginning, following it) all at once;
# writes the seconds until the last producer and until the last consumer finished to
# DIR/SETUP.times.
wire_topics_run() {
    local setup=$1 dir=$2/$1 in=$3 n=$4 port i t0 pid rc=0
    "wire_${setup}_start" "$dir"
    port=$(cat "$dir/port")
    local -a topics=() pids=()
    for ((i = 0; i < WIRE_TOPICS; i++)); do topics+=("t$i"); done
    # The topics exist before the consumers ask for them (a consumer's Metadata does not
    # create topics).
    for i in "${topics[@]}"; do kcat -b "127.0.0.1:$port" -L -t "$i" >/dev/null; done
    t0=$(date +%s%N)
    for i in "${topics[@]}"; do
        (consume_all "$port" "$i" "$n" "$dir/$i.last" && date +%s%N >"$dir/$i.consumed") &
        pids+=($!)
        (produce_file "$port" "$i" "$in" && date +%s%N >"$dir/$i.produced") &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
    [ "$rc" -eq 0 ] || return "$rc"
    for i in "${topics[@]}"; do expect_last_offset "$dir/$i.last" "$n"; done
    wire_stop "$dir"
    local produced consumed
    produced=$(cat "$dir"/*.produced | sort -n | tail -n 1)
    consumed=$(cat "$dir"/*.consumed | sort -n | tail -n 1)
    echo "$(calc "($produced - $t0) / 1e9" 6) $(calc "($consumed - $t0) / 1e9" 6)" >"$2/$setup.times"
}

# Wire scenario W4: WIRE_TOPICS producers and WIRE_TOPICS consumers on as many topics, at
# once, against the floor and kpfs in turn: aggregate records a second produced (until
# the last producer is done) and consumed (until the last consumer has every record).
scenario_wire_topics() {
    wire_sizes
    local dir=$B/wire_topics in n total
    in=$(input_file "$WIRE_TOPIC_BYTES" $((WIRE_RECORD_BYTES + 1)))
    n=$(wire_records "$(stat -c %s "$in")")
    total=$((n * WIRE_TOPICS))
    mkdir -p "$dir"
    sync
    local -a f k
    log "$WIRE_TOPICS producers and $WIRE_TOPICS consumers, $n records a topic: wire floor, kpfs serve"
    wire_topics_run floor "$dir" "$in" "$n"
    wire_topics_run kpfs "$dir" "$in" "$n"
    read -r -a f <"$dir/floor.times"
    read -r -a k <"$dir/kpfs.times"
    log "  floor: produced in ${f[0]}s, consumed in ${f[1]}s; kpfs: ${k[0]}s, ${k[1]}s"
    local kp fp kc fc label
    kp=$(calc "$total / ${k[0]}" 0) fp=$(calc "$total / ${f[0]}" 0)
    kc=$(calc "$total / ${k[1]}" 0) fc=$(calc "$total / ${f[1]}" 0)
    label="W4 $WIRE_TOPICS producers + $WIRE_TOPICS consumers, $WIRE_TOPICS topics of $(size "$WIRE_TOPIC_BYTES")"
    row "$label, produced records/s" "$kp" "$fp floor" "$(calc "100 * $kp / $fp" 0)%" ">= 80% of floor" \
        "$(verdict "$kp >= 0.8 * $fp")"
    row "$label, consumed records/s" "$kc" "$fc floor" "$(calc "100 * $kc / $fc" 0)%" ">= 80% of floor" \
        "$(verdict "$kc >= 0.8 * $fc")"
}

# consume_count PORT TOPIC N OUT: kcat -C of the topic's first N records, from the
# beginning of every partition; how many came goes to OUT.
consume_count() {
    timeout "$WIRE_DEADLINE_S" kcat -b "127.0.0.1:$1" -C -t "$2" -o beginning -c "$3" -f '\n' \
        "${WIRE_CONSUMER[@]}" | wc -l >"$4"
}

# Wire scenario W7 (issue 26): one producer, then one consumer (kcat), over a topic of 12
# partitions beside a topic of one, each on a fresh `kpfs serve` whose num.partitions
# makes the topic kcat's metadata request creates; the order alternates by round.
scenario_wire_partitions() {
    wire_sizes
    local dir=$B/wire_partitions in n r p port got parts pw pr
    in=$(input_file "$WIRE_BYTES" $((WIRE_RECORD_BYTES + 1)))
    n=$(wire_records "$(stat -c %s "$in")")
    mkdir -p "$dir"
    sync
    local -A produce=() fetch=()
    local -a order
    for ((r = 1; r <= ROUNDS; r++)); do
        order=(1 12)
        if ((r % 2 == 0)); then order=(12 1); fi
        for p in "${order[@]}"; do
            wire_kpfs_start "$dir/p$p" --override "num.partitions=$p"
            port=$(cat "$dir/p$p/port")
            pw=$(wire_timed "$dir/p$p/cpu_w" produce_file "$port" wide "$in")
            pr=$(wire_timed "$dir/p$p/cpu_r" consume_count "$port" wide "$n" "$dir/p$p/count")
            got=$(cat "$dir/p$p/count")
            parts=$(kcat -b "127.0.0.1:$port" -L -t wide | grep -c '^ *partition ')
            wire_stop "$dir/p$p"
            if [ "$got" != "$n" ] || [ "$parts" != "$p" ]; then
                log "bench: $got of $n records consumed from $parts partitions, expected $p"
                return 1
            fi
            produce[$p]=$(least "$pw" "${produce[$p]:-$pw}")
            fetch[$p]=$(least "$pr" "${fetch[$p]:-$pr}")
            log "  round $r, $p partition(s): produce ${pw}s, fetch ${pr}s"
        done
    done
    local mb one twelve step
    mb=$(calc "$n * $WIRE_RECORD_BYTES / 1e6" 6)
    for step in produce fetch; do
        local -n best=$step
        one=$(calc "$mb / ${best[1]}") twelve=$(calc "$mb / ${best[12]}")
        row "W7 one $step MB/s over 12 partitions, kcat, $(size "$WIRE_BYTES")$(rounds)" "$twelve" \
            "$one over 1 partition" "$(calc "100 * $twelve / $one" 0)%" "-" "info"
    done
}

