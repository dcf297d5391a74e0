#!/usr/bin/env bash
# CI: builds the three images with build-images.sh (static binaries on an
# empty base, buildah, no registry) into a storage of this script's own,
# checks each image's entrypoint, user, layers and contents, then runs
# trimswitch and two forgived from them with podman (host network, on
# 127.0.0.0/8) and sends a file from host 1 to host 2 through the switch
# with forgivectl from its image: /ready must answer 200 on all three,
# and the file must arrive byte for byte. Everything is removed at the end.
# Run as root from the repository's root: deploy/container/ci-test.sh
# Needs: buildah podman runc curl (Debian 12). docs/cluster.md, "Images".
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"

if [ "$(id -u)" != 0 ]; then
  echo "deploy/container/ci-test.sh: needs root (rootful podman with host networking)" >&2
  exit 1
fi
for c in buildah podman runc curl cmp sha256sum; do
  command -v "$c" >/dev/null || { echo "deploy/container/ci-test.sh: $c not installed (apt-get install buildah podman runc curl)" >&2; exit 1; }
done

t=$(mktemp -d /tmp/forgive-images.XXXXXX)
store=(--root "$t/storage" --runroot "$t/runroot")
export BUILDAH_GLOBAL="${store[*]}"
pod() { podman "${store[@]}" "$@"; }
names=()
cleanup() {
  status=$?
  for n in "${names[@]}"; do
    if [ "$status" != 0 ]; then
      echo "--- podman logs $n"
      pod logs "$n" 2>&1 | tail -n 20 || true
    fi
    pod rm -f -t 5 "$n" >/dev/null 2>&1 || true
  done
  pod system reset --force >/dev/null 2>&1 || true
  rm -rf "$t"
  exit "$status"
}
trap cleanup EXIT

echo "build: deploy/container/build-images.sh ci"
deploy/container/build-images.sh ci

for b in forgived trimswitch forgivectl; do
  img="localhost/$b:ci"
  entry=$(pod image inspect "$img" --format '{{json .Config.Entrypoint}}')
  user=$(pod image inspect "$img" --format '{{.Config.User}}')
  layers=$(pod image inspect "$img" --format '{{len .RootFS.Layers}}')
  [ "$entry" = "[\"/usr/local/bin/$b\"]" ] || { echo "$img: entrypoint $entry, want /usr/local/bin/$b" >&2; exit 1; }
  [ "$user" = "65532:65532" ] || { echo "$img: user $user, want 65532:65532" >&2; exit 1; }
  [ "$layers" = 1 ] || { echo "$img: $layers layers, want 1 (an empty base and the binary)" >&2; exit 1; }
  mnt=$(pod image mount "$img")
  files=$(cd "$mnt" && find . -mindepth 1 | sort | tr '\n' ' ')
  want="./usr ./usr/local ./usr/local/bin ./usr/local/bin/$b "
  [ "$files" = "$want" ] || { pod image unmount "$img" >/dev/null; echo "$img holds $files, want $want" >&2; exit 1; }
  build=$(go version -m "$mnt/usr/local/bin/$b")
  pod image unmount "$img" >/dev/null
  grep -q 'build	CGO_ENABLED=0' <<<"$build" || { echo "$img: /usr/local/bin/$b was not built with CGO_ENABLED=0:" >&2; echo "$build" >&2; exit 1; }
  grep -q "path	github.com/forgive-emu/forgive/cmd/$b" <<<"$build" || { echo "$img: /usr/local/bin/$b is not cmd/$b" >&2; exit 1; }
  echo "$img: entrypoint /usr/local/bin/$b, user 65532:65532, one layer holding only the static binary"
done

# A switch with two ports and two hosts, each on an address of its own in
# 127.0.0.0/8, this run's own.
net="127.97.$((RANDOM % 200 + 20))"
mkdir -p "$t/etc" "$t/run" "$t/data"
chown 65532:65532 "$t/run" "$t/data" # the containers run as 65532
cat >"$t/etc/sw.yaml" <<CONF
name: sw
metrics: $net.10:9464
defaults: {rate: 1Gbps, delay: 100us, data_queue: 1MiB, ecn: {kmin: 200KB, kmax: 800KB, pmax: 0.2}, trim: ndp}
ports:
  - {name: h1, local: "$net.10:4793", neighbor: "$net.11:4793", host: 1}
  - {name: h2, local: "$net.10:4794", neighbor: "$net.12:4793", host: 2}
routes:
  - {dst: [1], ports: [h1]}
  - {dst: [2], ports: [h2]}
CONF
for h in 1 2; do
  cat >"$t/etc/host$h.yaml" <<CONF
host: $h
name: host$h
listen: $net.1$h:4793
switch: $net.10:479$((2 + h))
socket: /run/forgive/host$h.sock
metrics: $net.1$h:9465
line_rate: 1Gbps
seed: $h
CONF
done

# podman as root raises the containers' open-file and process limits to
# its defaults; without CAP_SYS_RESOURCE (a container running this CI) it
# may not, so the limits are set within reach. runc: crun refuses a
# hybrid cgroup hierarchy, which some CI machines have.
run=(run --runtime runc --network host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096
  -v "$t/etc:/etc/forgive:ro")
start() {
  local name=$1
  shift
  names+=("$name")
  pod "${run[@]}" -d --name "$name" "$@" >/dev/null
}
id=$$
start "forgive-ci-sw-$id" localhost/trimswitch:ci --config /etc/forgive/sw.yaml
start "forgive-ci-host1-$id" -v "$t/run:/run/forgive" localhost/forgived:ci --config /etc/forgive/host1.yaml
start "forgive-ci-host2-$id" -v "$t/run:/run/forgive" localhost/forgived:ci --config /etc/forgive/host2.yaml
for a in "$net.10:9464" "$net.11:9465" "$net.12:9465"; do
  ok=
  for _ in $(seq 300); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$a/ready")" = 200 ]; then ok=yes; break; fi
    sleep 0.1
  done
  [ -n "$ok" ] || { echo "http://$a/ready: not 200 after 30 s" >&2; exit 1; }
  echo "http://$a/ready: 200 $(curl -s "http://$a/ready")"
done

head -c 4194304 /dev/urandom >"$t/data/in.bin"
chown 65532:65532 "$t/data/in.bin"
client=("${run[@]}" --rm -v "$t/run:/run/forgive" -v "$t/data:/data" localhost/forgivectl:ci)
names+=("forgive-ci-recv-$id")
pod "${client[@]/--rm/--name=forgive-ci-recv-$id}" --socket /run/forgive/host2.sock recv --peer 1 --flow 7 --out /data/out.bin --wait 2m >"$t/recv.txt" 2>&1 &
recv=$!
pod "${client[@]}" --socket /run/forgive/host1.sock send /data/in.bin --peer 2 --flow 7 --wait 2m
wait "$recv" || { echo "forgivectl recv failed:" >&2; cat "$t/recv.txt" >&2; exit 1; }
cat "$t/recv.txt"
cmp "$t/data/in.bin" "$t/data/out.bin"
echo "4 MiB from host 1 to host 2 through the switch, all three from their images: byte for byte, sha256 $(sha256sum <"$t/data/out.bin" | cut -c1-16)..."
# The switch counted the file out of port h2, towards host 2.
sent=$(curl -s "http://$net.10:9464/metrics" | awk '$1 == "trimswitch_sent_bytes_total{port=\"h2\"}" {print $2}')
awk -v s="${sent:-0}" 'BEGIN { exit !(s + 0 >= 4194304) }' || { echo "trimswitch_sent_bytes_total{port=\"h2\"} is ${sent:-absent}, want at least the file's 4194304" >&2; exit 1; }
echo "trimswitch_sent_bytes_total{port=\"h2\"} $sent"
for n in "${names[@]}"; do
  pod stop -t 10 "$n" >/dev/null 2>&1 || true
done
