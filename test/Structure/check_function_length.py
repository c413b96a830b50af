"""Checks that no function of the compiler or the runtime is over LIMIT lines.

Reads the C++ and CUDA sources under lib/, tools/, runtime/src and
runtime/tools. A function is a definition that starts at column 0 (a return
type, or Class::member, then a parenthesis) and whose body runs to the next
line that is a lone "}" at column 0: the house style (clang-format, LLVM)
writes every function outside a class body so. Its length counts from the
signature's first line to that brace.

Prints one line per function over the limit (file:line: name, length) and
exits 1 if any.
Usage: check_function_length.py SOURCE_ROOT [LIMIT]   (default 120)
"""
import os
import re
import sys

root = sys.argv[1]
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 120
FOLDERS = ["lib", "tools", "runtime/src", "runtime/tools"]
start_re = re.compile(r"^(?:[A-Za-z_][\w:<>,*& ]*[\s*&])?~?[A-Za-z_][\w:]*(?:<[^>]*>)?\(")
name_re = re.compile(r"(~?[A-Za-z_][\w:]*)(?:<[^>]*>)?\(")
control = ("if", "for", "while", "switch", "return", "case", "else", "do")
problems = []


def functions(lines):
    """(first line index, last line index, name) of each function definition."""
    i = 0
    while i < len(lines):
        line = lines[i]
        first = line.split("(")[0].split()
        if start_re.match(line) and first and first[0] not in control:
            # The signature's further lines are indented; a line at column 0
            # before the body means this was no definition (a macro's use).
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")) and \
                    (j == i or lines[j][:1] in (" ", "\t")):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{") and \
                    (j == i or lines[j][:1] in (" ", "\t")):
                k = j + 1
                while k < len(lines) and lines[k].rstrip() != "}":
                    k += 1
                m = name_re.search(line)
                yield i, k, m.group(1) if m else line.strip()
                i = k
        i += 1


for folder in FOLDERS:
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for name in sorted(files):
            if not name.endswith((".cpp", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(dirpath, name)
            lines = open(path, encoding="utf-8").read().split("\n")
            for first, last, fn in functions(lines):
                length = last - first + 1
                if length > limit:
                    problems.append(f"{os.path.relpath(path, root)}:{first + 1}: {fn} is "
                                    f"{length} lines (at most {limit}): split it into named "
                                    "steps")

for p in problems:
    print(p)
print(f"{len(problems)} functions over {limit} lines")
sys.exit(1 if problems else 0)
