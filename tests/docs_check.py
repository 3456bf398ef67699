#!/usr/bin/env python3
"""docs_check.py MODE SRC [ARGS]: checks on README.md and docs/*.md.

  links SRC             every relative link in README.md and docs/*.md names
                        a file or folder that exists, and every #anchor into
                        a Markdown file one of its headings (GitHub's slugs)
  front SRC             README.md is a front page: under 2,500 words, both
                        set-up commands in its first 40 lines, and its test
                        command the one .ci/run runs
  c_example SRC CC LIB  the README's first ```c block compiles (C11, -Wall
                        -Wextra -Werror) against include/convtune.h, inside
                        a function given stream, x, w and y, and links
                        against LIB (libconvtune.so; "-" to compile only)
  py_example SRC        the README's first ```python block parses, and every
                        convtune.NAME it uses is in the package's __all__
                        (convtune.nn.NAME: defined in convtune/nn.py)

Needs python3 only: no GPU, no torch.
"""
import ast
import os
import re
import subprocess
import sys
import tempfile

MAX_WORDS = 2500
FIRST_SCREEN = 40


def fail(message):
    print("docs_check: " + message)
    sys.exit(1)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def markdown_files(src):
    files = [os.path.join(src, "README.md")]
    docs = os.path.join(src, "docs")
    files += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    return files


def without_code(text):
    """The text with fenced blocks and inline code spans blanked out."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading):
    """GitHub's anchor for a heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    found = set()
    counts = {}
    for line in re.sub(r"^```.*?^```", "", read(path), flags=re.S | re.M).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            base = slug(m.group(1))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else "%s-%d" % (base, n))
    return found


def check_links(src):
    bad = []
    count = 0
    for path in markdown_files(src):
        text = without_code(read(path))
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            count += 1
            file_part, _, anchor = target.partition("#")
            where = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            rel = os.path.relpath(path, src)
            if not os.path.exists(where):
                bad.append("%s: %s: no such file" % (rel, target))
            elif anchor and where.endswith(".md") and anchor not in anchors(where):
                bad.append("%s: %s: no heading with that anchor" % (rel, target))
    if bad:
        fail("broken links:\n  " + "\n  ".join(bad))
    print("%d relative links, each to a file that exists" % count)


def readme_commands(readme):
    """The indented command lines that follow the 'Main job' and 'Tests' labels."""
    lines = readme.splitlines()
    found = {}
    for label in ("Main job", "Tests"):
        for i, line in enumerate(lines):
            if line.startswith(label + " "):
                for j in range(i + 1, len(lines)):
                    if lines[j].startswith("    sh "):
                        found[label] = (j + 1, lines[j].strip())
                        break
                break
    return found


def check_front(src):
    readme = read(os.path.join(src, "README.md"))
    words = len(readme.split())
    if words >= MAX_WORDS:
        fail("README.md has %d words; a front page has fewer than %d" % (words, MAX_WORDS))
    commands = readme_commands(readme)
    for label in ("Main job", "Tests"):
        if label not in commands:
            fail("README.md: no command after a line starting '%s'" % label)
        line, _ = commands[label]
        if line > FIRST_SCREEN:
            fail("README.md: the %s command is on line %d, past the first %d" % (label, line, FIRST_SCREEN))
    if "./build/convtune tune bench/suite.json" not in commands["Main job"][1]:
        fail("README.md: the main command does not tune bench/suite.json: " + commands["Main job"][1])
    ci = read(os.path.join(src, ".ci", "run")).splitlines()
    test_command = commands["Tests"][1]
    ci_command = [l.strip() for l in ci if l.startswith("sh tools/install-deps.sh")]
    if not ci_command:
        fail(".ci/run: no line running tools/install-deps.sh (the README's test command)")
    if ci_command[0] != test_command:
        fail("the README's test command and .ci/run's differ:\n  README:  %s\n  .ci/run: %s"
             % (test_command, ci_command[0]))
    print("README.md: %d words; commands on lines %d and %d; .ci/run runs the test command"
          % (words, commands["Main job"][0], commands["Tests"][0]))


def first_block(readme, lang):
    m = re.search(r"^```" + lang + r"\n(.*?)^```", readme, flags=re.S | re.M)
    if not m:
        fail("README.md: no ```%s block" % lang)
    return m.group(1)


def check_c_example(src, cc, lib):
    code = first_block(read(os.path.join(src, "README.md")), "c")
    includes = [l for l in code.splitlines() if l.startswith("#include")]
    body = "\n".join("  " + l for l in code.splitlines() if not l.startswith("#include"))
    if "#include <convtune.h>" not in includes:
        fail("README.md: the C example does not include <convtune.h>")
    program = "\n".join(["#include <stdio.h>"] + includes + [
        "int readme_example(void *stream, const float *x, const float *w, float *y);",
        "int readme_example(void *stream, const float *x, const float *w, float *y) {",
        body,
        "  return 0;",
        "}",
        "int main(void) { return 0; }",
        ""])
    with tempfile.TemporaryDirectory() as tmp:
        c_file = os.path.join(tmp, "readme_example.c")
        with open(c_file, "w") as f:
            f.write(program)
        cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic",
               "-I", os.path.join(src, "include"), c_file]
        if lib == "-":
            cmd += ["-c", "-o", os.path.join(tmp, "readme_example.o")]
        else:
            cmd += ["-o", os.path.join(tmp, "readme_example"), lib, "-Wl,--allow-shlib-undefined"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            fail("the README's C example does not build:\n%s\n%s\n--- as compiled:\n%s"
                 % (" ".join(cmd), r.stdout + r.stderr, program))
    print("the README's C example (%d lines) compiles%s" % (len(code.splitlines()),
                                                           "" if lib == "-" else " and links"))


def exported(path, names_from_all):
    tree = ast.parse(read(path))
    if names_from_all:
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                return set(ast.literal_eval(node.value))
        fail("%s: no __all__" % path)
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return list(reversed(parts))
    return None


def check_py_example(src):
    code = first_block(read(os.path.join(src, "README.md")), "python")
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        fail("the README's PyTorch example does not parse: %s" % e)
    package = os.path.join(src, "python", "convtune")
    top = exported(os.path.join(package, "__init__.py"), True)
    nn = exported(os.path.join(package, "nn.py"), False)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names = dotted(node)
            if names and names[0] == "convtune" and len(names) >= 2:
                used.add(tuple(names[1:3]))
    if not used:
        fail("the README's PyTorch example uses nothing of convtune")
    for names in sorted(used):
        if names[0] not in top:
            fail("the README's PyTorch example uses convtune.%s, which the package does not export" % names[0])
        if names[0] == "nn" and len(names) == 2 and names[1] not in nn:
            fail("the README's PyTorch example uses convtune.nn.%s, which convtune/nn.py does not define" % names[1])
    print("the README's PyTorch example (%d lines) parses; it uses %s"
          % (len(code.splitlines()), ", ".join("convtune." + ".".join(n) for n in sorted(used))))


def main(argv):
    if len(argv) < 3:
        fail(__doc__)
    mode, src = argv[1], argv[2]
    if mode == "links":
        check_links(src)
    elif mode == "front":
        check_front(src)
    elif mode == "c_example" and len(argv) == 5:
        check_c_example(src, argv[3], argv[4])
    elif mode == "py_example":
        check_py_example(src)
    else:
        fail(__doc__)


if __name__ == "__main__":
    main(sys.argv)
