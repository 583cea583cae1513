#!/usr/bin/env python3
"""Assemble the workspace script that ships from its modules, and check them.

    python3 build.py          write workspace.py from workspace/*.py
    python3 build.py --check  exit 1, naming the module and the rule, if
                              workspace.py is not what the modules make or a
                              module breaks a rule below

This file does not ship. What ships is workspace.py: the text the operator
approves by its SHA-256 and the host runs on a target as
`python3 -c <text> workspace`, one program with no file of its own there. The
modules in workspace/ are that program by concern, each a Python module an
editor, a reader or a test can open alone (`python3 -m workspace` with this
folder on the path runs the same program from them).

The shipped text is the modules in MODULES order, each after a rule line that
names it, with its imports of sibling modules (`from .x import ...`) left out
and nothing else changed. That flat text means what the modules mean only
while these hold, so --check refuses a module that breaks one:
  - every module in workspace/ is listed in MODULES, and every listed one exists;
  - __init__.py is the program's head: comments only (importing a module runs it);
  - a module begins with a comment of what it owns, has at most MAX_LINES
    lines, and no run of more than two blank lines;
  - a top-level name is defined by one module only (the flat text has one
    namespace);
  - a module imports from a sibling listed before it, and only names that
    sibling defines;
  - every global name a module reads is its own, imported, or a builtin;
  - `global` names only the module's own names (an imported copy would not
    change with it);
  - only __main__.py, the last, runs anything at import beyond definitions.

Standard library only; needs Python 3.8 or later (it reads end_lineno). The
text it writes runs on Python 3.6.
"""

import ast
import builtins
import os
import symtable
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "workspace")
SHIPPED = os.path.join(HERE, "workspace.py")
MODULES = (
    "__init__", "base", "walk", "files", "archive", "runtime", "bridge",
    "operations", "frames", "scopes", "serve", "__main__",
)
MAX_LINES = 500
RULE_WIDTH = 80


class Broken(Exception):
    pass


def read_module(name):
    path = os.path.join(PACKAGE, name + ".py")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise Broken("workspace/%s.py: listed in MODULES but cannot be read (%s)" % (name, e.strerror))


def top_level_names(tree):
    """What a module defines for the flat namespace."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def plain_imports(tree):
    """The names a module's top-level `import x` statements bind (the same
    standard module may be imported by every module)."""
    return {(a.asname or a.name).split(".")[0]
            for node in tree.body if isinstance(node, ast.Import) for a in node.names}


def sibling_imports(tree):
    """The module's `from .x import a, b` statements: (node, x, [a, b])."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            found.append(node)
    return found


def read_globals(text, file):
    """Global names the module reads, and the names its `global` statements name."""
    reads, declared = set(), set()

    def visit(table):
        for sym in table.get_symbols():
            if table.get_type() == "module":
                if sym.is_referenced() and not (sym.is_assigned() or sym.is_imported()):
                    reads.add(sym.get_name())
            else:
                if sym.is_declared_global():
                    declared.add(sym.get_name())
                if sym.is_global() and sym.is_referenced():
                    reads.add(sym.get_name())
        for child in table.get_children():
            visit(child)

    visit(symtable.symtable(text, file, "exec"))
    return reads, declared


def check(texts):
    """Every rule of the module docstring, on the modules' texts."""
    listed = set(MODULES)
    present = {f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py")}
    for stray in sorted(present - listed):
        raise Broken("workspace/%s.py: not in build.py's MODULES (add it in its place, or remove it)" % stray)
    owner, trees = {}, {}
    for name in MODULES:
        file = "workspace/%s.py" % name
        text = texts[name]
        lines = text.split("\n")
        tree = ast.parse(text, file)
        trees[name] = tree
        if name == "__init__":
            if tree.body:
                raise Broken("%s: the program's head holds comments only, not code (line %d)"
                             % (file, tree.body[0].lineno))
            continue
        if not lines[0].startswith("# "):
            raise Broken("%s: begins with a comment of what the module owns" % file)
        if len(lines) - 1 > MAX_LINES:
            raise Broken("%s: %d lines, over %d: split it by concern" % (file, len(lines) - 1, MAX_LINES))
        run = 0
        for i, line in enumerate(lines, 1):
            run = run + 1 if line.strip() == "" else 0
            if run > 2 and i < len(lines):
                raise Broken("%s:%d: more than two blank lines in a row" % (file, i))
        for defined in sorted(top_level_names(tree)):
            if defined in owner:
                raise Broken("%s: defines %s, which workspace/%s.py defines: the shipped text has one namespace"
                             % (file, defined, owner[defined]))
            owner[defined] = name
        if name != "__main__":
            for node in tree.body:
                plain = isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign,
                                          ast.Import, ast.ImportFrom))
                docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                if not (plain or docstring):
                    raise Broken("%s:%d: only definitions at the top level (what runs belongs in __main__.py)"
                                 % (file, node.lineno))
    for index, name in enumerate(MODULES):
        if name == "__init__":
            continue
        file = "workspace/%s.py" % name
        tree = trees[name]
        own = top_level_names(tree) | plain_imports(tree)
        imported = set()
        for node in sibling_imports(tree):
            if node in tree.body and node.level == 1 and node.module in MODULES[1:index]:
                for alias in node.names:
                    if alias.asname or alias.name == "*":
                        raise Broken("%s:%d: import %s by its own name (the shipped text has no aliases)"
                                     % (file, node.lineno, alias.name))
                    if owner.get(alias.name) != node.module:
                        raise Broken("%s:%d: imports %s from .%s, which does not define it"
                                     % (file, node.lineno, alias.name, node.module))
                    imported.add(alias.name)
            else:
                raise Broken("%s:%d: imports from .%s: a module imports at its top only from modules "
                             "MODULES lists before it" % (file, node.lineno, node.module))
        reads, declared = read_globals(texts[name], file)
        for n in sorted(reads - own - imported - set(dir(builtins)) - {"__name__", "__file__"}):
            where = "workspace/%s.py defines it: import it" % owner[n] if n in owner else "nothing defines it"
            raise Broken("%s: reads %s, %s" % (file, n, where))
        for n in sorted(declared - own):
            raise Broken("%s: `global %s` names another module's name: change it through a function there"
                         % (file, n))


def rule(name):
    head = "# --- workspace/%s.py " % name
    return head + "-" * max(3, RULE_WIDTH - len(head))


def assemble(texts):
    """The shipped text: the head, then each module after its rule, its sibling
    imports left out."""
    parts = [texts["__init__"].rstrip("\n")]
    for name in MODULES[1:]:
        text = texts[name]
        tree = ast.parse(text)
        drop = set()
        for node in sibling_imports(tree):
            drop.update(range(node.lineno, node.end_lineno + 1))
        lines = [line for i, line in enumerate(text.split("\n"), 1) if i not in drop]
        kept = []
        for line in lines:
            if line.strip() == "" and len(kept) >= 2 and kept[-1].strip() == "" and kept[-2].strip() == "":
                continue
            kept.append(line)
        parts.append(rule(name) + "\n" + "\n".join(kept).strip("\n"))
    return "\n\n\n".join(parts) + "\n"


def main(argv):
    checking = argv[1:] == ["--check"]
    if argv[1:] not in ([], ["--check"]):
        sys.stderr.write(__doc__)
        return 2
    try:
        texts = {name: read_module(name) for name in MODULES}
        check(texts)
    except (Broken, SyntaxError) as e:
        sys.stderr.write("build.py: %s\n" % e)
        return 1
    text = assemble(texts)
    if checking:
        try:
            with open(SHIPPED, encoding="utf-8") as f:
                shipped = f.read()
        except OSError as e:
            shipped = None
        if shipped != text:
            sys.stderr.write("build.py: workspace.py is not what workspace/*.py make: run "
                             "`python3 guest-ssh-sandbox/scripts/build.py` and commit both\n")
            return 1
        return 0
    with open(SHIPPED + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(SHIPPED + ".tmp", SHIPPED)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
