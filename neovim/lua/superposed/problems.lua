--- superposed-lsp for Neovim: what keeps the server from starting, found before it starts and
--- said once, with what to do.
---
--- Left to itself, Neovim skips a server command that is not executable without a word (only
--- its log says so), and reports an interpreter without the package only as "Client superposed
--- quit with exit code 1". Here:
--- - a FileType check (`watch`) says when the command's program is missing;
--- - lsp/superposed.lua's root_dir calls `before_start`, which asks the interpreter of the
---   default command (`python -m lsp_server.cli`) whether the package is installed in it (its
---   distribution, from `/`: a checkout in the current folder has the package's source and
---   egg-info, not its dependencies), once per interpreter and in the background, and starts
---   the server only if it is.
--- The messages name `make setup` and the plugin's `python` option.
local M = {}

M.FIX = "run `make setup` in the superposed-lsp checkout, then set python = "
  .. "'<checkout>/.venv/bin/python' in require('superposed').setup() "
  .. "(or cmd in vim.lsp.config('superposed'))"

-- Exits 0 when superposed-lsp is installed (pip's record of it, with its dependencies) and
-- its server module is there; else prints why and exits 3.
local CHECK = [[
import importlib.metadata, importlib.util, sys
try:
    importlib.metadata.distribution("superposed-lsp")
    found = importlib.util.find_spec("lsp_server.cli") is not None
except importlib.metadata.PackageNotFoundError:
    print("it is not installed there")
    sys.exit(3)
except ImportError as err:
    print(err)
    sys.exit(3)
if not found:
    print("No module named 'lsp_server.cli'")
    sys.exit(3)
]]
local RUN = { text = true, cwd = '/' } -- not the current folder: it may be a checkout

--- What each interpreter answered: true (it has the package) or the problem.
local checked = {}

--- The interpreter of a server command run as `python -m lsp_server.cli`; nil for any other.
function M.python_of(cmd)
  if type(cmd) == 'table' and cmd[2] == '-m' and cmd[3] == 'lsp_server.cli' then
    return cmd[1]
  end
  return nil
end

--- The problem with `cmd` found without running anything: its program does not exist or is
--- not executable. nil when it is (or `cmd` is a function: the user's own start).
function M.interpreter(cmd)
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' or vim.fn.executable(cmd[1]) == 1 then
    return nil
  end
  local what = M.python_of(cmd) and 'the interpreter' or 'the server command'
  return ('superposed: %s %s does not exist or is not executable: %s'):format(what, cmd[1], M.FIX)
end

--- The problem an interpreter's answer to CHECK says, or nil.
local function answer_problem(python, out)
  if out.code == 0 then
    return nil
  end
  local why = vim.trim(out.code == 3 and (out.stdout or '') or (out.stderr or ''))
  why = why ~= '' and why:gsub('%s*\n%s*', ' '):sub(-200) or ('exit code ' .. out.code)
  return ('superposed: %s has no superposed-lsp (%s): %s'):format(python, why, M.FIX)
end

--- Calls `on_done(problem)` once it is known whether `cmd` can start (problem nil: it can):
--- at once from what is known, else after asking its interpreter in the background.
function M.check(cmd, on_done)
  local problem = M.interpreter(cmd)
  local python = M.python_of(cmd)
  if problem or not python then
    return on_done(problem)
  elseif checked[python] ~= nil then
    return on_done(checked[python] ~= true and checked[python] or nil)
  end
  local ok = pcall(vim.system, { python, '-c', CHECK }, RUN, function(out)
    vim.schedule(function()
      checked[python] = answer_problem(python, out) or true
      on_done(checked[python] ~= true and checked[python] or nil)
    end)
  end)
  if not ok then -- it went away since executable() said yes
    on_done(('superposed: %s cannot run: %s'):format(python, M.FIX))
  end
end

--- The same, waited for (:checkhealth): the problem, or nil.
function M.check_now(cmd)
  local problem = M.interpreter(cmd)
  local python = M.python_of(cmd)
  if problem or not python then
    return problem
  end
  local ok, job = pcall(vim.system, { python, '-c', CHECK }, RUN)
  if not ok then
    return ('superposed: %s cannot run: %s'):format(python, M.FIX)
  end
  local out = job:wait(20000)
  checked[python] = answer_problem(python, out) or true
  return checked[python] ~= true and checked[python] or nil
end

--- Ask the interpreters again (after :SuperposedRestart or a new setup(): the user may have
--- fixed them).
function M.forget()
  checked = {}
end

--- lsp/superposed.lua's root_dir: start the server for `bufnr` (on_dir: at the root the
--- config's root_markers find) once the command is known to work; else say why, once.
function M.before_start(bufnr, on_dir)
  local config = vim.lsp.config[require('superposed').name] or {}
  M.check(config.cmd, function(problem)
    if problem then
      require('superposed.status').fail(problem)
    elseif vim.api.nvim_buf_is_valid(bufnr) then
      on_dir(vim.fs.root(bufnr, config.root_markers or {}))
    end
  end)
end

--- A buffer the server would serve, whose command's program is missing (Neovim then starts
--- nothing and says nothing): said, once.
function M.check_buffer(bufnr)
  local name = require('superposed').name
  local config = vim.lsp.is_enabled(name) and vim.lsp.config[name]
  local filetype = vim.api.nvim_buf_is_valid(bufnr) and vim.bo[bufnr].filetype or ''
  if config and (not config.filetypes or vim.tbl_contains(config.filetypes, filetype)) then
    local problem = M.interpreter(config.cmd)
    if problem then
      require('superposed.status').fail(problem)
    end
  end
end

--- `check_buffer` on every FileType.
function M.watch()
  vim.api.nvim_create_autocmd('FileType', {
    group = vim.api.nvim_create_augroup('superposed.problems', { clear = true }),
    callback = function(args)
      M.check_buffer(args.buf)
    end,
    desc = 'superposed: say when the server command cannot run',
  })
end

return M
