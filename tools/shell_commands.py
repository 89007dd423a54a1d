"""The read-only commands run_shell runs without asking: every option each may take (and which take a value), and
what its operands are. What is not written here (another option, an abbreviated long option, a second operand
where a command writes it, a file outside the workspace) makes the command ask first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Command:
    """What one read-only command may be given and still run at once."""

    flags: str = ""  # short options without a value, alone or clustered (-rn)
    takes: str = ""  # short options with a value, attached or the next word (-n5, -n 5)
    long: str = ""  # long options without a value, spelled out in full
    long_takes: str = ""  # long options with a value (--lines=5, --lines 5)
    long_may_take: str = ""  # long options whose value, if any, follows '=' (--color, --color=never)
    operands: str = "paths"  # "paths": files it reads; "text": printed, never opened; "none"
    most: int | None = None  # the most operands it reads (uniq writes to its second)
    counts: bool = False  # digits are a count (head -5, grep -3, grep -n3)
    pattern: bool = False  # the first operand is a pattern, not a file, unless -e gives one (grep)
    unsafe: str = ""  # options known to write, run a program, follow links or read a named file: the message says so


COMMON = "help version"
COMMANDS = {
    "ls": Command("aAbBcCdDfFgGhHiklmnNopqQrRsStuUvxXZ1", "ITw",
                  "all almost-all author escape ignore-backups directory dired file-type full-time "
                  "group-directories-first no-group human-readable si dereference-command-line "
                  "dereference-command-line-symlink-to-dir inode kibibytes numeric-uid-gid literal hide-control-chars "
                  "show-control-chars quote-name reverse recursive size context zero",
                  "block-size format hide ignore indicator-style quoting-style sort time time-style tabsize width",
                  "color classify hyperlink", unsafe="-L --dereference"),
    "cat": Command("AbeEnstTuv", long="show-all number-nonblank number squeeze-blank show-ends show-tabs "
                                      "show-nonprinting"),
    "head": Command("qvz", "nc", "quiet silent verbose zero-terminated", "lines bytes", counts=True),
    "tail": Command("qvz", "nc", "quiet silent verbose zero-terminated", "lines bytes", counts=True,
                    unsafe="-f -F --follow --retry --pid"),
    "wc": Command("cmlLw", long="bytes chars lines max-line-length words", long_takes="total",
                  unsafe="--files0-from"),
    "grep": Command("EFGPiywxzsvVbnHhoqaIrLlcTZU", "emABC",
                    "extended-regexp fixed-strings basic-regexp perl-regexp ignore-case no-ignore-case word-regexp "
                    "line-regexp null-data no-messages invert-match byte-offset line-number line-buffered "
                    "with-filename no-filename only-matching quiet silent text recursive files-without-match "
                    "files-with-matches count initial-tab null binary no-group-separator",
                    "regexp max-count label binary-files include exclude exclude-dir before-context after-context "
                    "context group-separator", "color colour", counts=True, pattern=True,
                    unsafe="-R --dereference-recursive -f --file --exclude-from -d --directories -D --devices"),
    "find": Command(),  # its expression is read by find_reason, below
    "pwd": Command("LP", long="logical physical", operands="none"),
    "echo": Command(operands="text"),  # no option opens anything; every word is printed
    "sort": Command("bdfgiMhnRrVcCmsuz", "kt",
                    "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting "
                    "month-sort human-numeric-sort numeric-sort random-sort reverse version-sort merge stable unique "
                    "zero-terminated debug", "key field-separator sort", "check",
                    unsafe="-o --output -T --temporary-directory --compress-program --files0-from --random-source "
                           "-S --buffer-size --parallel --batch-size"),
    "uniq": Command("cdDiuz", "fsw", "count repeated ignore-case unique zero-terminated",
                    "skip-fields skip-chars check-chars", "all-repeated group", most=1),
    "cut": Command("nsz", "bcdf", "complement only-delimited zero-terminated",
                   "bytes characters delimiter fields output-delimiter"),
    "diff": Command("qscuenytTprNiEZbwBadv", "CUWFxID",
                    "normal brief report-identical-files ed rcs side-by-side left-column suppress-common-lines "
                    "show-c-function expand-tabs initial-tab suppress-blank-empty recursive no-dereference new-file "
                    "unidirectional-new-file ignore-file-name-case no-ignore-file-name-case ignore-case "
                    "ignore-tab-expansion ignore-trailing-space ignore-space-change ignore-all-space "
                    "ignore-blank-lines text strip-trailing-cr minimal speed-large-files",
                    "width show-function-line label tabsize exclude ignore-matching-lines ifdef horizon-lines palette",
                    "context unified color",
                    unsafe="-l --paginate -X --exclude-from --from-file --to-file -S --starting-file"),
    "stat": Command("Lft", "c", "dereference file-system terse", "format printf cached"),
    "file": Command("bikLhNrn0E", "F",
                    "brief mime mime-type mime-encoding keep-going dereference no-dereference no-pad print0 raw "
                    "extension apple no-buffer", "separator",
                    unsafe="-m --magic-file -f --files-from -C --compile -z --uncompress -Z --uncompress-noreport "
                           "-p --preserve-date -s --special-files -S --no-sandbox"),
    "du": Command("0abcDHhklmPSsx", "Bdt",
                  "null all apparent-size bytes total dereference-args human-readable inodes count-links "
                  "no-dereference separate-dirs si summarize one-file-system",
                  "block-size max-depth threshold time-style exclude", "time",
                  unsafe="-L --dereference -X --exclude-from --files0-from"),
    "tree": Command("adfxqNQpugshDFvtcUrCAiSnXJ", "LPIHT",
                    "noreport dirsfirst filesfirst inodes device du si prune matchdirs ignore-case metafirst fflinks "
                    "nolinks", "charset filelimit timefmt sort",
                    unsafe="-l -R -o --fromfile --fromtabfile --gitignore --gitfile --infofile --hintro --houtro"),
}
READ_ONLY = tuple(COMMANDS)

# find: the words before its expression, and its expression's words (each with how many words follow it)
FIND_LEADING = ("-H", "-P")
FIND_WORDS = {
    **dict.fromkeys(["(", ")", "!", ",", "-not", "-a", "-and", "-o", "-or", "-print", "-print0", "-ls", "-prune",
                     "-quit", "-depth", "-empty", "-true", "-false", "-nouser", "-nogroup", "-mount", "-xdev",
                     "-noleaf", "-daystart", "-ignore_readdir_race", "-noignore_readdir_race", "-nowarn", "-warn"], 0),
    **dict.fromkeys(["-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-lname",
                     "-ilname", "-type", "-maxdepth", "-mindepth", "-size", "-mtime", "-mmin", "-atime", "-amin",
                     "-ctime", "-cmin", "-used", "-perm", "-user", "-group", "-uid", "-gid", "-links", "-inum",
                     "-printf", "-regextype", "-fstype"], 1),
}
FIND_PATHS = ("-newer", "-anewer", "-cnewer", "-samefile")  # followed by a file find reads the times of
FIND_UNSAFE = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls", "-L",
               "-follow", "-files0-from", "-xtype", "-readable", "-writable", "-executable")


@dataclass
class Reading:
    """What a read-only command line comes to: why it must ask first (None: it runs at once), the words it reads
    as files, and the options it is run with on top of its own (diff's --no-dereference)."""

    reason: str | None = None
    paths: list[str] | None = None
    added: tuple[str, ...] = ()


def read(name: str, args: list[str], is_dir: Callable[[str], bool]) -> Reading:
    """How the read-only command ``name`` reads ``args``, GNU-style: options anywhere before ``--``, everything
    after it an operand."""
    if name == "find":
        return _find(args)
    command = COMMANDS[name]
    if command.operands == "text":
        return Reading(paths=[])
    operands, given, index, ended = [], set(), 0, False
    while index < len(args):
        word, index = args[index], index + 1
        if ended or word == "-" or not word.startswith("-"):
            operands.append(word)
        elif word == "--":
            ended = True
        elif word.startswith("--"):
            option, equals, _ = word[2:].partition("=")
            if option in command.long.split() or option in COMMON.split():
                if equals:
                    return Reading(f"{name} --{option} takes no value")
            elif option in command.long_takes.split():
                index += 0 if equals else 1  # its value: after the '=', or the next word
            elif option not in command.long_may_take.split():
                return Reading(_unknown(name, "--" + option, command))
            given.add(option)
        else:
            for at, letter in enumerate(word[1:], 1):
                if letter not in command.flags + command.takes and not (command.counts and letter.isdigit()):
                    return Reading(_unknown(name, "-" + letter, command))
                given.add(letter)
                if letter in command.takes:
                    index += 0 if word[at + 1:] else 1  # its value: the rest of the word, or the next word
                    break
    if command.pattern and operands and not given & {"e", "regexp"}:
        operands = operands[1:]  # grep's pattern
    if command.operands == "none" and operands:
        return Reading(f"{name} takes no operands here")
    if command.most is not None and len(operands) > command.most:
        return Reading(f"{name} writes to its operand {operands[command.most]!r}")
    recursive = bool(given & {"r", "recursive"}) or any(map(is_dir, operands))
    added = ("--no-dereference",) if name == "diff" and recursive else ()  # diff follows the links in the
    # folders it compares: here it may not
    return Reading(paths=[o for o in operands if o != "-"], added=added)


def _unknown(name: str, option: str, command: Command) -> str:
    if option in command.unsafe.split():
        return f"{name} {option} can change files, run programs, read a file it names or leave the workspace"
    return f"{name} {option} is not an option run_shell knows to be read-only"


def _find(args: list[str]) -> Reading:
    """find's words: -H or -P, an optional --, the starting points, then an expression of known tests and actions
    that only print."""
    index, paths = 0, []
    while index < len(args) and args[index] in FIND_LEADING:
        index += 1
    if index < len(args) and args[index] == "--":
        index += 1
    while index < len(args) and not args[index].startswith("-") and args[index] not in ("(", ")", "!", ","):
        paths.append(args[index])
        index += 1
    while index < len(args):
        word, index = args[index], index + 1
        if word in FIND_PATHS:
            paths += args[index:index + 1]
            index += 1
        elif word in FIND_WORDS:
            value = args[index:index + FIND_WORDS[word]]
            if word == "-printf" and any("%Y" in v for v in value):
                return Reading("find -printf %Y follows links")
            index += FIND_WORDS[word]
        elif word in FIND_UNSAFE:
            return Reading(f"find {word} can change files, run programs, read a file it names or leave the workspace")
        else:
            return Reading(f"find {word} is not a word run_shell knows to be read-only")
    return Reading(paths=paths)
