#!/usr/bin/env python3
"""Checks libcollie.so's ABI against the public headers.

  abi_test.py exports LIB INCLUDE_DIR   nm -D of LIB against collie.h and collie.hpp, both ways,
                                        and each symbol's version node
  abi_test.py version LIB INCLUDE_DIR   SONAME, file name and collieGetVersion against collie.h

LIB is the library's linker name (libcollie.so); INCLUDE_DIR holds collie/collie.h. A released
node's symbols are listed in NODE.symbols beside this script; every other symbol belongs to the
node of collie.h's version, COLLIE_<major>.<minor> (COLLIE_<major> for minor 0).
"""
import ctypes
import os
import re
import subprocess
import sys

FUNCTION_TYPES = set("TWi")  # text, weak and indirect (ifunc) symbols


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def strip_preprocessor(text):
    text = re.sub(r"\\\n", " ", text)
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))


def c_declarations(header):
    """{name: marked COLLIE_API} for every function collie.h declares."""
    text = strip_preprocessor(strip_comments(open(header).read()))
    decls = {}
    for stmt in text.split(";"):
        m = re.search(r"\b(collie\w*)\s*\(", stmt)
        if m:
            decls[m.group(1)] = re.search(r"\bCOLLIE_API\b", stmt[: m.start()]) is not None
    return decls


def class_body(text, start):
    """The text between the brace at or after start and its match."""
    open_at = text.index("{", start)
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1 : i]
    raise ValueError("unbalanced braces")


def member_statements(body):
    """The class-level statements of body, each with whether it carries an inline body."""
    stmts, cur, depth = [], "", 0
    for ch in body:
        if depth == 0 and ch == ";":
            stmts.append((cur, False))
            cur = ""
        elif ch == "{":
            if depth == 0:
                stmts.append((cur, True))
                cur = ""
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            cur += ch
    return stmts


def out_of_line_members(body):
    """Names of the members a class declares but does not define inline."""
    body = re.sub(r"\b(public|private|protected)\s*:(?!:)", " ", body)
    names = set()
    for stmt, inline in member_statements(body):
        stmt = " ".join(stmt.split())
        if inline or "(" not in stmt or stmt.startswith(("template", "friend", "using")):
            continue
        if re.search(r"=\s*(default|delete|0)\s*$", stmt):
            continue
        m = re.search(r"(operator\s*[^\s(]+|~?\w+)\s*\(", stmt)
        names.add(m.group(1).replace(" ", ""))
    return names


def cpp_declarations(header):
    """{class: out-of-line member names} for the COLLIE_API classes of collie.hpp."""
    text = strip_preprocessor(strip_comments(open(header).read()))
    return {
        m.group(1): out_of_line_members(class_body(text, m.end()))
        for m in re.finditer(r"\bclass\s+COLLIE_API\s+(\w+)", text)
    }


def exported(lib):
    """[(type, raw name, demangled name)] of the symbols lib defines in its dynamic table."""
    def nm(*flags):
        out = subprocess.run(["nm", "-D", "--defined-only", *flags, lib], check=True,
                             capture_output=True, text=True).stdout
        return [l.split(" ", 2) for l in out.splitlines() if l.strip()]

    raw, demangled = nm(), nm("-C")
    assert len(raw) == len(demangled)
    return [(r[1], r[2], d[2]) for r, d in zip(raw, demangled)]


def split_version(name):
    """(symbol, version node) of an nm name such as collieAllReduce@@COLLIE_0."""
    base, _, version = name.partition("@")
    return base, version.lstrip("@")


def released_nodes():
    """{node: its symbols} of the released version nodes, from the NODE.symbols files."""
    here = os.path.dirname(os.path.abspath(__file__))
    nodes = {}
    for f in sorted(os.listdir(here)):
        if f.endswith(".symbols"):
            lines = open(os.path.join(here, f)).read().splitlines()
            nodes[f[: -len(".symbols")]] = {l.strip() for l in lines
                                            if l.strip() and not l.startswith("#")}
    return nodes


def current_node(major, minor):
    return f"COLLIE_{major}.{minor}" if minor else f"COLLIE_{major}"


def check_versions(symbols, defined_nodes, major, minor):
    """Each symbol in its node: a released node's own, else the current version's."""
    released, current = released_nodes(), current_node(major, minor)
    node_of = {sym: node for node, syms in released.items() for sym in syms}
    errors = [f"version node {n} is defined but no release or collie.h names it"
              for n in sorted(defined_nodes - set(released) - {current})]
    seen = set()
    for name, version in symbols:
        want = node_of.get(name, current)
        seen.add(name)
        if not version:
            errors.append(f"exported without a version node (want {want}): {name}")
        elif version != want:
            errors.append(f"exported at {version}, want {want}: {name}")
    errors += [f"{node} symbol no longer exported: {sym}"
               for sym, node in sorted(node_of.items()) if sym not in seen]
    return errors


def cpp_member(demangled, classes):
    """(class, member) if demangled names a plain member function of an exported class."""
    m = re.match(r"collie::(\w+)::(operator[^(\[]+|~?\w+)(\[abi:\w+\])?\(", demangled)
    if m and m.group(1) in classes:
        return m.group(1), m.group(2)
    return None


def check_exports(lib, include):
    c_decls = c_declarations(os.path.join(include, "collie", "collie.h"))
    classes = cpp_declarations(os.path.join(include, "collie", "collie.hpp"))
    errors = [f"collie.h: {n} is declared without COLLIE_API" for n, api in c_decls.items()
              if not api]
    major, minor, _ = header_version(include)
    c_seen, cpp_seen, nodes, versions = set(), set(), set(), []
    for kind, name, demangled in exported(lib):
        if kind == "A":  # a version node's own symbol
            nodes.add(split_version(name)[0])
            continue
        (name, version), demangled = split_version(name), split_version(demangled)[0]
        versions.append((name, version))
        if kind not in FUNCTION_TYPES:
            errors.append(f"exported data or other symbol: {kind} {demangled}")
        elif not name.startswith("_Z"):
            c_seen.add(name)
            if name not in c_decls:
                errors.append(f"exported C symbol not declared in collie.h: {name}")
        elif (member := cpp_member(demangled, classes)) and member[1] in classes[member[0]]:
            cpp_seen.add(member)
        else:
            errors.append(f"exported C++ symbol outside collie.hpp's API: {demangled}")
    errors += [f"declared in collie.h, not exported: {n}" for n in sorted(set(c_decls) - c_seen)]
    errors += [f"declared in collie.hpp, not exported: collie::{c}::{m}"
               for c, members in sorted(classes.items()) for m in sorted(members)
               if (c, m) not in cpp_seen]
    if not classes:
        errors.append("collie.hpp: no COLLIE_API class found")
    errors += check_versions(versions, nodes, major, minor)
    print(f"{len(c_seen)} C functions and {len(cpp_seen)} C++ members of "
          f"{', '.join(sorted(classes))} exported; nodes {', '.join(sorted(nodes))}")
    return errors


def header_version(include):
    text = open(os.path.join(include, "collie", "collie.h")).read()
    return [int(re.search(rf"#define COLLIE_{p} +(\d+)", text).group(1))
            for p in ("MAJOR", "MINOR", "PATCH")]


def check_version(lib, include):
    major, minor, patch = header_version(include)
    errors = []
    dyn = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True,
                         text=True).stdout
    soname = re.search(r"Library soname: \[([^\]]+)\]", dyn)
    want = f"libcollie.so.{major}"
    if not soname or soname.group(1) != want:
        errors.append(f"SONAME {soname.group(1) if soname else None}, want {want}")
    real = os.path.basename(os.path.realpath(lib))
    if real != f"libcollie.so.{major}.{minor}.{patch}":
        errors.append(f"library file {real}, want libcollie.so.{major}.{minor}.{patch}")
    # A sanitizer runtime must be the process's first library, so python3 cannot load one late.
    if re.search(r"NEEDED.*\[lib[a-z]*san\.so", dyn):
        print(f"SONAME {want}, file {real}; collieGetVersion not called (sanitizer build)")
        return errors
    got = ctypes.c_int(-1)
    ctypes.CDLL(lib).collieGetVersion(ctypes.byref(got))
    code = major * 10000 + minor * 100 + patch
    if got.value != code:
        errors.append(f"collieGetVersion gave {got.value}, collie.h says {code}")
    print(f"SONAME {want}, file {real}, collieGetVersion {got.value}")
    return errors


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("exports", "version"):
        sys.exit(__doc__)
    check = check_exports if sys.argv[1] == "exports" else check_version
    errors = check(sys.argv[2], sys.argv[3])
    for e in errors:
        print("FAIL:", e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
