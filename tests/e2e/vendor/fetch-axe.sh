#!/bin/sh
# How tests/e2e/vendor/axe-core-4.14.1.min.js was fetched: the npm package, pinned, checked, and only its
# minified build and licence files kept (the e2e tests inject it; nothing is loaded from a CDN).
# Re-run from the repository root to re-vendor; bump VERSION and both sums together.
set -eu
VERSION=4.14.1
TARBALL_SHA256=e6b0ce02b84d892e2e33e403485e7f3d6c29e2be6df65daf44d89ba564139745
MIN_JS_SHA256=29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c
dest=tests/e2e/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "axe-core@$VERSION" >/dev/null)
echo "$TARBALL_SHA256  $work/axe-core-$VERSION.tgz" | sha256sum -c -
tar -xzf "$work/axe-core-$VERSION.tgz" -C "$work"
echo "$MIN_JS_SHA256  $work/package/axe.min.js" | sha256sum -c -
cp "$work/package/axe.min.js" "$dest/axe-core-$VERSION.min.js"
cp "$work/package/LICENSE" "$dest/LICENSE"
cp "$work/package/LICENSE-3RD-PARTY.txt" "$dest/LICENSE-3RD-PARTY.txt"
