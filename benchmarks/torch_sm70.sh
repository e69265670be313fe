#!/usr/bin/env bash
# Which torch wheels on PyPI carry Volta (sm_70) kernels, from the wheels themselves:
#   1. the CUDA runtime each version's wheel requires (pip's dry-run report of its metadata);
#   2. the ELF images inside its libtorch_cuda.so, per architecture (cuobjdump --list-elf, from
#      PyPI's nvidia-cuda-cuobjdump wheel).
# Usage: benchmarks/torch_sm70.sh 2.7.1 2.8.0 2.10.0 2.11.0   (downloads ~0.9 GB per version)
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps -d "$work/cuobj" nvidia-cuda-cuobjdump
(cd "$work/cuobj" && python3 -m zipfile -e ./*.whl .)
cuobjdump=$(find "$work/cuobj" -name cuobjdump -type f | head -1)
chmod +x "$cuobjdump"
for v in "$@"; do
  python3 -m pip install -q --dry-run --no-deps --ignore-installed --report "$work/r.json" "torch==$v"
  cuda=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['install'][0]['metadata']
print(' '.join(d.split(';')[0] for d in m.get('requires_dist', []) if 'cuda-runtime' in d or d.startswith('cuda-toolkit')))" "$work/r.json")
  python3 -m pip download -q --no-deps -d "$work/w$v" "torch==$v"
  whl=$(ls "$work/w$v"/*.whl)
  python3 - "$whl" "$work/lib$v.so" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("torch/lib/libtorch_cuda.so") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  archs=$("$cuobjdump" --list-elf "$work/lib$v.so" | grep -oE 'sm_[0-9]+a?\.' | tr -d . | sort -V | uniq -c | awk '{printf "%s(%s) ", $2, $1}')
  echo "torch $v ($(basename "$whl")): requires ${cuda:-nothing named cuda}; ELF images: $archs"
  rm -rf "$work/w$v" "$work/lib$v.so"
done
