"""What never reaches a stored file: secrets in environment values and command lines.

Every writer of a result, a sweep's state or a log header passes what it stores through this
module, so that one rule decides. The rule, whatever a variable is called:

* a NAME that looks secret (``is_secret_name``: PASS, PWD, SECRET, TOKEN, CRED, PRIVATE, AUTH,
  COOKIE, SIGNATURE, APIKEY or ACCESSKEY anywhere in it, or a part, between ``_``, ``-`` or
  ``.``, that is KEY, ends in KEY, or is SIG or PW) keeps only "<redacted>": as a variable, as
  ``NAME=value`` anywhere in a value or a command (``env SSHPASS=...``, ``mpirun -x``,
  ``srun --export=ALL,NAME=...``, ``docker -e``, a shell line), as a URL query parameter
  (``?access_token=...``), as ``--name=value`` or ``--name value``, and as a JSON
  ``"name": "value"``;
* a password in userinfo, ``scheme://user:pw@host`` or ``user:pw@host``, becomes
  ``user:<redacted>@host``;
* a run of 32 or more characters of the base64/base64url alphabet (``A-Z a-z 0-9 + _ -``, then
  ``=`` padding) that mixes upper case, lower case and digits is taken for an API key or a
  token. ``/`` and ``.`` end a run, so paths survive; hex (commit ids, sha256 digests, uuids)
  is never mixed case, so the identities dlperf records survive too.

A value a secret name guards ends at white space, ``&``, ``,`` or ``;`` (or its closing
quote): a password holding one of those keeps the part after it, so the name rule is not the
only rule. The words of ``$DLPERF_SSH`` (the ssh program and its options: a jump host, a key,
``sshpass``) are never stored at all: a command started through it keeps only the program's
name.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence

REDACTED = "<redacted>"
SSH_ENV = "DLPERF_SSH"  # the ssh program and options, e.g. "ssh -F ~/.ssh/cluster_config"
SSH_OPTIONS_HIDDEN = f"<options from ${SSH_ENV} not stored>"

_SECRET_SUBSTRINGS = (
    "PASS",  # PASSWORD, PASSWD, PASSPHRASE, SSHPASS, DB_PASS
    "PWD",
    "SECRET",
    "TOKEN",
    "CRED",  # CREDS, CREDENTIAL(S)
    "PRIVATE",
    "AUTH",
    "COOKIE",
    "SIGNATURE",
    "APIKEY",
    "ACCESSKEY",
)
_SECRET_PARTS = frozenset({"KEY", "SIG", "PW"})
# Names that match the markers but hold no secret: the shell's working directories, the
# Hugging Face tokenizers' thread switch, NCCL's InfiniBand partition key.
NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD", "TOKENIZERS_PARALLELISM", "NCCL_IB_PKEY"})


def is_secret_name(name: str) -> bool:
    """Whether a variable, option or parameter called `name` holds a secret."""
    upper = name.upper().lstrip("-")
    if not upper or upper in NOT_SECRET_NAMES:
        return False
    if any(marker in upper for marker in _SECRET_SUBSTRINGS):
        return True
    parts = re.split(r"[^A-Z0-9]+", upper)
    return any(p in _SECRET_PARTS or (p.endswith("KEY") and p not in NOT_SECRET_NAMES)
               for p in parts)  # fmt: skip


# A value as a shell or a list writes it: single-quoted (shlex.quote's '"'"' included),
# double-quoted, or bare up to white space or a list/query/command separator.
_VALUE = r"""(?:'(?:[^']|'"'"')*'|"(?:[^"\\]|\\.)*"|[^\s&,;'"]*)"""
_ASSIGNMENT = re.compile(rf"(?<![\w.-])(-{{0,2}}[A-Za-z_][\w.-]*)=({_VALUE})")
_OPTION_WITH_VALUE = re.compile(rf"(?<![\w-])(--[A-Za-z][\w-]*)(\s+)({_VALUE})")
_JSON_PAIR = re.compile(r'("([\w.-]+)"\s*:\s*)"(?:[^"\\]|\\.)*"')
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\"]*):[^/\s@'\"]*@")
_BARE_USERINFO = re.compile(
    r"(?<![\w.:/@%~+-])([A-Za-z0-9._~%+-]+):[^\s@/'\"]+@(?=[\w\[])(?!sha\d*:)"
)
_TOKEN_RUN = re.compile(r"(?<![A-Za-z0-9+_-])[A-Za-z0-9+_-]{32,}=*(?![A-Za-z0-9+_=-])")


def _looks_like_key(run: str) -> bool:
    return (
        any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
    )


def _assignment(match: re.Match[str]) -> str:
    name = match.group(1)
    return f"{name}={REDACTED}" if is_secret_name(name) else match.group(0)


def _option(match: re.Match[str]) -> str:
    name, space, value = match.groups()
    if not value or value.startswith("-") or not is_secret_name(name):
        return match.group(0)
    return f"{name}{space}{REDACTED}"


def _json_pair(match: re.Match[str]) -> str:
    return f'{match.group(1)}"{REDACTED}"' if is_secret_name(match.group(2)) else match.group(0)


def _token_run(match: re.Match[str]) -> str:
    return REDACTED if _looks_like_key(match.group(0)) else match.group(0)


def redact_value(value: str) -> str:
    """`value` (a variable's value, a word of a command, a whole shell line) with every part
    that looks secret replaced by "<redacted>" (the rule is in the module's docstring)."""
    if not value:
        return value
    out = _URL_USERINFO.sub(rf"\1:{REDACTED}@", value)
    out = _BARE_USERINFO.sub(rf"\1:{REDACTED}@", out)
    out = _JSON_PAIR.sub(_json_pair, out)
    out = _ASSIGNMENT.sub(_assignment, out)
    out = _OPTION_WITH_VALUE.sub(_option, out)
    return _TOKEN_RUN.sub(_token_run, out)


def redact_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Each variable as stored: "<redacted>" under a secret-looking name, else its value
    through `redact_value`."""
    return {
        name: REDACTED if is_secret_name(name) else redact_value(value)
        for name, value in environ.items()
    }


def _ssh_words(environ: Mapping[str, str]) -> list[str]:
    try:
        return shlex.split(environ.get(SSH_ENV, ""))
    except ValueError:  # unbalanced quotes: ssh_program() would have refused it
        return []


def stored_argv(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """`argv` as a result or a log header may keep it.

    A command started through ``$DLPERF_SSH`` (its words lead `argv`) keeps only the program's
    name in their place, followed by a note that its options are not stored; a word that is
    ``NAME=value`` with a secret-looking NAME, and the word after a secret-looking ``--name``,
    become "<redacted>"; every word goes through `redact_value`.
    """
    words = [os.fspath(w) for w in argv]
    ssh = _ssh_words(os.environ if environ is None else environ)
    if ssh and words[: len(ssh)] == ssh:
        shown = [redact_value(os.path.basename(ssh[0]))]
        if len(ssh) > 1:
            shown.append(SSH_OPTIONS_HIDDEN)
        words = [*shown, *words[len(ssh) :]]
    out: list[str] = []
    hide_next = False
    for word in words:
        name, eq, _ = word.partition("=")
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif eq and re.fullmatch(r"-{0,2}[A-Za-z_][\w.-]*", name) and is_secret_name(name):
            out.append(f"{name}={REDACTED}")
        else:
            hide_next = not eq and word.startswith("--") and is_secret_name(word)
            out.append(redact_value(word))
    return out
