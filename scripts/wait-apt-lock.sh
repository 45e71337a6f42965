#!/bin/sh
# Wait until no other process holds apt's or dpkg's locks (unattended-upgrades on a fresh
# machine, another install), at most APT_LOCK_TIMEOUT_S seconds (default 600); then exit 0,
# or exit 1 saying which lock is still held. Reads /proc/locks: needs only sh, stat and grep.
# APT_LOCK_FILES (space-separated) replaces the list of lock files (tests).
timeout_s="${APT_LOCK_TIMEOUT_S:-600}"
files="${APT_LOCK_FILES:-/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock}"

held() {
    for f in $files; do
        [ -e "$f" ] || continue
        inode=$(stat -c %i "$f" 2>/dev/null) || continue
        if grep -q ":$inode " /proc/locks 2>/dev/null; then
            echo "$f"
            return 0
        fi
    done
    return 1
}

waited=0
while lock=$(held); do
    if [ "$waited" -ge "$timeout_s" ]; then
        echo "erro: $lock continua bloqueado por outro processo do apt/dpkg após ${timeout_s} s;" \
            "espere ele terminar (ps aux | grep -e apt -e dpkg) e rode o make de novo." >&2
        exit 1
    fi
    if [ $((waited % 30)) -eq 0 ]; then
        echo "Aguardando outro processo do apt/dpkg liberar $lock" \
            "(espera de até ${timeout_s} s; já esperou ${waited} s)..."
    fi
    sleep 1
    waited=$((waited + 1))
done
exit 0
