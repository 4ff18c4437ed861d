"""Shell completion for a group of commands (``distc``), the way click's worked, so that a shell
start-up file holding ``eval "$(_DISTC_COMPLETE=bash_source distc)"`` works again (imported only
when ``_DISTC_COMPLETE`` is set).

``_DISTC_COMPLETE=bash_source`` (``zsh_source``, ``fish_source``) prints the shell's completion
script; the script then runs the program with ``_DISTC_COMPLETE=bash_complete`` (``zsh_complete``,
``fish_complete``) and the words of the command line in ``COMP_WORDS`` / ``COMP_CWORD``, and the
program prints one candidate a line, ``plain,WORD`` (a command, an option, a choice) or ``file,``
(let the shell complete a file name).  What is completed: the command names, the options of the
group or of the command (``-`` typed), a ``Choice`` option's values (``--pp-schedule V``,
``--pp-schedule=V``), file names elsewhere."""

from __future__ import annotations

import os

from .params import Choice, Option

SHELLS = ("bash", "zsh", "fish")

_BASH = """\
_{fn}_complete() {{
    local IFS=$'\\n' line
    COMPREPLY=()
    for line in $(COMP_WORDS="${{COMP_WORDS[*]}}" COMP_CWORD=$COMP_CWORD {var}=bash_complete "$1"); do
        case ${{line%%,*}} in
            file) compopt -o default 2>/dev/null; COMPREPLY=(); return 0 ;;
            plain) COMPREPLY+=("${{line#*,}}") ;;
        esac
    done
    return 0
}}
complete -o nosort -F _{fn}_complete {prog} 2>/dev/null || complete -F _{fn}_complete {prog}
"""

_ZSH = """\
#compdef {prog}
_{fn}_complete() {{
    local -a found
    local line
    for line in ${{(f)"$(COMP_WORDS="${{(pj:\\n:)words}}" COMP_CWORD=$((CURRENT - 1)) {var}=zsh_complete {prog})"}}; do
        case ${{line%%,*}} in
            file) _files; return ;;
            plain) found+=("${{line#*,}}") ;;
        esac
    done
    (( ${{#found}} )) && compadd -Q -a found
}}
compdef _{fn}_complete {prog}
"""

_FISH = """\
function __{fn}_complete
    set -l words (commandline -cpo)
    set -l current (commandline -ct)
    for line in (env COMP_WORDS=(string join \\n -- $words $current) COMP_CWORD=(count $words) {var}=fish_complete {prog})
        set -l kind (string split -m 1 , -- $line)
        switch $kind[1]
            case file
                __fish_complete_path $current
            case plain
                echo $kind[2]
        end
    end
end
complete --no-files --command {prog} --arguments '(__{fn}_complete)'
"""


def script(shell: str, prog: str, var: str) -> str:
    """The completion script of ``shell`` for the program ``prog`` (run as ``prog``; ``var``: the
    environment variable that asks for completions)."""
    fn = "".join(c if c.isalnum() else "_" for c in prog)
    return {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}[shell].format(prog=prog, fn=fn, var=var)


def words_of(environ) -> tuple[list[str], str]:
    """(the words before the cursor, program name excluded; the word being typed) from ``COMP_WORDS``
    (the words one a line) and ``COMP_CWORD`` (the index of the word being typed)."""
    words = environ.get("COMP_WORDS", "").split("\n")
    try:
        cword = int(environ.get("COMP_CWORD", ""))
    except ValueError:
        cword = len(words) - 1
    cword = max(0, min(cword, len(words)))
    return words[1:cword], (words[cword] if cword < len(words) else "")


def candidates(group, ctx, args: list[str], incomplete: str) -> list[tuple[str, str]]:
    """What may come at the cursor: ``(kind, word)`` pairs, kind ``plain`` or ``file``."""
    name = next((a for a in args if a[:1] != "-"), None)
    if name is None:  # distc [OPTIONS] ...: a command, or an option of distc itself
        if incomplete[:1] == "-":
            return _options(group, ctx, incomplete)
        return [("plain", n) for n in group.list_commands(ctx) if n.startswith(incomplete)]
    cmd = group.get_command(ctx, name)
    if cmd is None:
        return []
    from . import Context

    sub = Context(cmd, parent=ctx, info_name=name)
    rest = args[args.index(name) + 1:]
    by_name = {o: p for p in cmd.get_params(sub) if isinstance(p, Option) for o in (*p.opts, *p.secondary_opts)}
    if "--" not in rest and rest[-2:-1] and rest[-1] == "=":  # (bash splits --opt=V into --opt, =, V)
        rest = rest[:-1]
    if "--" not in rest and rest and rest[-1] in by_name and not by_name[rest[-1]].is_flag:
        return _values(by_name[rest[-1]], incomplete, "")  # the value of the option before the cursor
    if "--" not in rest and incomplete[:2] == "--" and "=" in incomplete:
        opt, _, part = incomplete.partition("=")
        p = by_name.get(opt)
        return [] if p is None or p.is_flag else _values(p, part, opt + "=")
    if "--" not in rest and incomplete[:1] == "-":
        return _options(cmd, sub, incomplete)
    return [("file", "")]


def _options(cmd, ctx, incomplete: str) -> list[tuple[str, str]]:
    names = [o for p in cmd.get_params(ctx) if isinstance(p, Option) and not p.hidden
             for o in (*p.opts, *p.secondary_opts)]
    return [("plain", o) for o in names if o.startswith(incomplete)]


def _values(p, incomplete: str, prefix: str) -> list[tuple[str, str]]:
    if isinstance(p.type, Choice):
        return [("plain", prefix + str(c)) for c in p.type.choices if str(c).startswith(incomplete)]
    return [("file", "")]


def run(group, ctx, instruction: str, prog: str, var: str, out, err) -> int:
    """Answer ``var=instruction`` (``bash_source`` ... ``fish_complete``) on ``out``: 0, or 1 with a
    one-line message on ``err`` for an instruction that names no known shell or step."""
    shell, _, step = instruction.partition("_")
    if shell not in SHELLS or step not in ("source", "complete"):
        err.write(f"distc: error: {var}={instruction}: expected {{bash,zsh,fish}}_source (the completion script "
                  f"for a shell start-up file: eval \"$({var}=bash_source {prog})\") or {{bash,zsh,fish}}_complete\n")
        return 1
    if step == "source":
        out.write(script(shell, prog, var))
        return 0
    args, incomplete = words_of(os.environ)
    for kind, word in candidates(group, ctx, args, incomplete):
        out.write(f"{kind},{word}\n")
    return 0
