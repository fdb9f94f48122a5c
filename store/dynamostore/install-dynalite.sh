#!/usr/bin/env bash
# Installs dynalite (npm), a DynamoDB-compatible server the tests of this
# package run against, once per machine, and prints the path of its
# cli.js (scripts/test.sh exports it as DYNALITE_CLI). Needs node and
# npm. The install lives in ${XDG_CACHE_HOME:-$HOME/.cache}/idemkit.
#
# dynalite 4.0.0 predates ReturnValuesOnConditionCheckFailure (DynamoDB,
# 2023): it drops the parameter and answers a failed condition without
# the item. The install is patched to return the item, read under the
# same per-key lock as the condition check, as DynamoDB does; without the
# patch the tests of one-round-trip claims would fail.
set -euo pipefail
version=4.0.0
patch=1
dir="${XDG_CACHE_HOME:-$HOME/.cache}/idemkit/dynalite-$version-p$patch"
cli="$dir/node_modules/dynalite/cli.js"
if [ ! -f "$dir/.ready" ]; then
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  npm install --silent --no-audit --no-fund --prefix "$dir.tmp" "dynalite@$version" >&2
  d="$dir.tmp/node_modules/dynalite"
  for op in putItem deleteItem; do
    # accept the parameter (unknown ones are dropped by the validator)...
    sed -i "s/^  ReturnValues: {$/  ReturnValuesOnConditionCheckFailure: { type: 'String', enum: [ 'ALL_OLD', 'NONE' ] },\n&/" "$d/validations/$op.js"
    # ...and return the item the condition failed on.
    sed -i "/db.checkConditional(data, existingItem)/{n;s/if (invalid != null) return cb(invalid)/if (invalid != null) { if (existingItem \&\& data.ReturnValuesOnConditionCheckFailure == 'ALL_OLD') invalid.body.Item = existingItem; return cb(invalid) }/}" "$d/actions/$op.js"
    grep -q ReturnValuesOnConditionCheckFailure "$d/validations/$op.js"
    grep -q "invalid.body.Item = existingItem" "$d/actions/$op.js"
  done
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  touch "$dir/.ready"
fi
echo "$cli"
