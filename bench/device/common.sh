# Sourced by call1.sh / call2.sh on the GPU machine (from the repository root).
export PYTHONUNBUFFERED=1
S=${S:-/tmp/dev}            # kept between calls while the machine stays warm
PY=${PY:-python3}
OUT=${OUT:-$S/out}
DEVICE=${DEVICE:-cuda}
mkdir -p "$S" "$OUT"
export PYTHONPATH=${PRE_PATH:+$PRE_PATH:}$PWD/bench/device/site:$PWD:$S/site
export TOOLTUNE_DATA_DIR=$S/data BFCL_PROJECT_ROOT=$S/bfcl_root
