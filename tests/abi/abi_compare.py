#!/usr/bin/env python3
"""Compare hipxx's HIP C header against a real AMD header, entry by entry.

Steps:
  1. Obtain Debian's libamdhip64-dev (fetch-amd-header.sh; failure = test
     failure, never a skip).
  2. Preprocess both headers with the C compiler and parse what each declares:
     enums and their enumerators, structs/unions and their (nested) fields,
     typedefs, object-like macros; prototypes come from `gcc -aux-info`.
  3. For everything BOTH headers declare (plus RENAMED pairs and ALLOWED keys),
     generate one C program per header that prints `key<TAB>value` for each
     enumerator value, macro value, sizeof/alignof of each type, offsetof and
     sizeof of each field.
  4. Compile and run both, compare line by line. A difference fails the test
     unless the key is in abi_allowlist.ALLOWED, in which case hipxx's value
     must equal the current value recorded there.

Usage: abi_compare.py --ours-include DIR --fetch SCRIPT --workdir DIR [--verbose] -- CC...
"""

import argparse
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abi_allowlist import ALLOWED, RENAMED  # noqa: E402

# --------------------------------------------------------------------------
# Preprocessing: keep only text and macros that come from the header's own
# directory, so libc types and macros are not part of the comparison.
# --------------------------------------------------------------------------

LINEMARK = re.compile(r'^#\s*(\d+)\s+"([^"]*)"')
DEFINE = re.compile(r'^#\s*define\s+([A-Za-z_]\w*)(\()?\s*(.*)$')
UNDEF = re.compile(r'^#\s*undef\s+([A-Za-z_]\w*)')


def run(cmd, **kw):
    return subprocess.run(cmd, check=False, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def preprocess(cc, flags, include_line, scope_dir):
    src = include_line + "\n"
    res = run(cc + flags + ["-E", "-dD", "-x", "c", "-"], input=src)
    if res.returncode != 0:
        sys.exit("preprocessing failed:\n" + res.stderr)
    scope = os.path.realpath(scope_dir) + os.sep
    in_scope = False
    code = []
    macros = {}
    for line in res.stdout.splitlines():
        m = LINEMARK.match(line)
        if m:
            path = m.group(2)
            in_scope = (not path.startswith("<")
                        and os.path.realpath(path).startswith(scope))
            continue
        if line.startswith("#"):
            if not in_scope:
                continue
            d = DEFINE.match(line)
            if d:
                name, fnlike, body = d.group(1), d.group(2), d.group(3).strip()
                if fnlike is None and body:
                    macros[name] = body
                else:
                    macros.pop(name, None)
                continue
            u = UNDEF.match(line)
            if u:
                macros.pop(u.group(1), None)
            continue
        if in_scope:
            code.append(line)
    return "\n".join(code), macros


# --------------------------------------------------------------------------
# A small C declaration parser: enough for enums, structs, unions, typedefs.
# --------------------------------------------------------------------------

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<str>"(?:\\.|[^"\\])*")
  | (?P<chr>'(?:\\.|[^'\\])*')
  | (?P<op>->|\.\.\.|<<|>>|::|.)
""", re.VERBOSE | re.DOTALL)

C_TYPE_WORDS = {
    "void", "char", "short", "int", "long", "float", "double", "signed",
    "unsigned", "_Bool", "bool", "const", "volatile", "restrict", "struct",
    "union", "enum", "static", "extern", "inline", "register", "typedef",
    "__restrict", "__restrict__", "__inline", "__inline__", "_Complex",
}


def tokenize(text):
    toks = []
    for m in TOKEN.finditer(text):
        if m.lastgroup == "ws":
            continue
        toks.append(m.group(0))
    # Drop GNU decorations that carry no layout information for us.
    out = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in ("__attribute__", "__attribute", "__asm__", "__asm", "__declspec"):
            i += 1
            if i < len(toks) and toks[i] == "(":
                depth = 0
                while i < len(toks):
                    if toks[i] == "(":
                        depth += 1
                    elif toks[i] == ")":
                        depth -= 1
                        if depth == 0:
                            break
                    i += 1
            i += 1
            continue
        if t in ("__extension__", "__inline", "__inline__", "__restrict", "__restrict__"):
            i += 1
            continue
        out.append(t)
        i += 1
    return out


class Body:
    """Placeholder for a parsed enum/struct/union body inside a declaration."""

    def __init__(self, kind, tag, items):
        self.kind = kind      # 'enum' | 'struct' | 'union'
        self.tag = tag        # tag name or None
        self.items = items    # enum: [names]; struct: [(path, is_bitfield)]


class Header:
    def __init__(self):
        self.enumerators = set()
        self.enum_types = {}     # type spelling -> True
        self.records = {}        # type spelling -> [(path, is_bitfield)]
        self.record_tags = {}    # "struct tag" -> fields (complete only)
        self.typedefs = {}       # name -> ('complete'|'incomplete'|'fnptr', tokens)
        self.macros = {}
        self.protos = {}


def skip_balanced(toks, i, open_, close):
    depth = 0
    while i < len(toks):
        if toks[i] == open_:
            depth += 1
        elif toks[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def split_top(items, sep=","):
    parts, cur, depth = [], [], 0
    for t in items:
        if isinstance(t, str):
            if t in "([":
                depth += 1
            elif t in ")]":
                depth -= 1
            elif t == sep and depth == 0:
                parts.append(cur)
                cur = []
                continue
        cur.append(t)
    parts.append(cur)
    return parts


def declarator_name(decl):
    """Name declared by one declarator (token list, type prefix allowed)."""
    strs = [t for t in decl if isinstance(t, str)]
    # Function pointer: ... ( * NAME ) ( ... )
    for k in range(len(strs) - 2):
        if strs[k] == "(" and strs[k + 1] == "*":
            j = k + 2
            while j < len(strs) and strs[j] in ("const", "volatile", "*"):
                j += 1
            if j < len(strs) and re.match(r"[A-Za-z_]\w*$", strs[j]):
                return strs[j], True
    depth = 0
    name = None
    for t in strs:
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        elif depth == 0 and t == ":":
            break
        elif depth == 0 and re.match(r"[A-Za-z_]\w*$", t) and t not in C_TYPE_WORDS:
            name = t
    return name, False


def parse_body(toks, i, kind, tag):
    """toks[i] == '{'. Returns (Body, index after '}')."""
    i += 1
    if kind == "enum":
        end = skip_balanced(toks, i - 1, "{", "}")
        names = []
        for item in split_top(toks[i:end - 1]):
            if item and re.match(r"[A-Za-z_]\w*$", item[0]):
                names.append(item[0])
        return Body(kind, tag, names), end
    fields = []
    decl = []
    while i < len(toks) and toks[i] != "}":
        t = toks[i]
        if t in ("struct", "union", "enum"):
            j = i + 1
            sub_tag = None
            if j < len(toks) and re.match(r"[A-Za-z_]\w*$", toks[j]):
                sub_tag = toks[j]
                j += 1
            if j < len(toks) and toks[j] == "{":
                body, i = parse_body(toks, j, t, sub_tag)
                decl.append(body)
                continue
        if t == ";":
            fields.extend(member_fields(decl))
            decl = []
            i += 1
            continue
        decl.append(t)
        i += 1
    return Body(kind, tag, fields), i + 1


def member_fields(decl):
    if not decl:
        return []
    body = next((t for t in decl if isinstance(t, Body)), None)
    rest = [t for t in decl if not isinstance(t, Body)]
    # Unnamed struct/union member: its fields belong to the enclosing record.
    if body is not None and body.kind != "enum" and not any(
            isinstance(t, str) and re.match(r"[A-Za-z_]\w*$", t) for t in rest):
        return list(body.items)
    out = []
    for d in split_top(decl):
        name, _ = declarator_name(d)
        if name is None:
            continue
        strs = [t for t in d if isinstance(t, str)]
        is_bitfield = ":" in strs
        out.append((name, is_bitfield))
        if body is not None and body.kind != "enum" and not any(t == "*" for t in strs):
            for sub, bf in body.items:
                out.append((name + "." + sub, bf))
    return out


def record_body(hdr, body, typedef_names):
    # A type is named by its typedef when it has one, else by its tag.
    if body.kind == "enum":
        hdr.enumerators.update(body.items)
        for n in typedef_names:
            hdr.enum_types[n] = True
        if body.tag and not typedef_names:
            hdr.enum_types["enum " + body.tag] = True
        return
    if body.tag:
        hdr.record_tags[body.kind + " " + body.tag] = body.items
    spellings = list(typedef_names)
    if body.tag and not typedef_names:
        spellings.append(body.kind + " " + body.tag)
    for s in spellings:
        hdr.records[s] = body.items


def parse_header(text, hdr):
    toks = tokenize(text)
    i = 0
    decl = []
    while i < len(toks):
        t = toks[i]
        if t in ("struct", "union", "enum"):
            j = i + 1
            tag = None
            if j < len(toks) and re.match(r"[A-Za-z_]\w*$", toks[j]):
                tag = toks[j]
                j += 1
            if j < len(toks) and toks[j] == "{":
                body, i = parse_body(toks, j, t, tag)
                decl.append(body)
                continue
        if t == "{":
            prev = decl[-1] if decl else None
            i = skip_balanced(toks, i, "{", "}")
            if prev == ")":          # function definition: declaration ends
                decl = []
            continue
        if t == ";":
            finish_decl(decl, hdr)
            decl = []
            i += 1
            continue
        decl.append(t)
        i += 1


def finish_decl(decl, hdr):
    if not decl:
        return
    bodies = [t for t in decl if isinstance(t, Body)]
    is_typedef = decl[0] == "typedef"
    if not is_typedef:
        for b in bodies:
            record_body(hdr, b, [])
        return
    parts = split_top(decl[1:])
    names = []
    for k, d in enumerate(parts):
        name, fnptr = declarator_name(d)
        if name is None:
            continue
        strs = [t for t in d if isinstance(t, str)]
        # A typedef of a struct/union that this header never completes
        # (e.g. an opaque `struct hipArray`) has no size to compare.
        is_ptr = "*" in strs
        if fnptr:
            kind = "fnptr"
        elif is_ptr:
            kind = "complete"
        else:
            kind = "complete"
            spec = strs if k == 0 else [t for t in parts[0] if isinstance(t, str)]
            for kw in ("struct", "union"):
                if kw in spec and not bodies:
                    idx = spec.index(kw)
                    tag = spec[idx + 1] if idx + 1 < len(spec) else None
                    if (kw + " " + str(tag)) not in hdr.record_tags:
                        kind = "incomplete"
            if any(s == "[" for s in strs):
                kind = "complete"
        names.append(name)
        hdr.typedefs[name] = (kind, d)
        if not bodies and not is_ptr and not fnptr:
            # typedef struct tag name;  -> same record as the tag
            for kw in ("struct", "union"):
                if kw in strs:
                    idx = strs.index(kw)
                    tagname = kw + " " + strs[idx + 1]
                    if tagname in hdr.record_tags:
                        hdr.records[name] = hdr.record_tags[tagname]
            if "enum" in strs:
                hdr.enum_types[name] = True
    for b in bodies:
        # Only declarators that are the type itself (not pointers to it).
        direct = [n for n, (k2, d) in ((n, hdr.typedefs[n]) for n in names)
                  if k2 != "fnptr" and "*" not in [t for t in d if isinstance(t, str)]]
        record_body(hdr, b, direct)


def fnptr_signature(tokens):
    """Normalised signature of a function-pointer typedef (param names dropped)."""
    strs = [t for t in tokens if isinstance(t, str)]
    text = " ".join(strs)
    m = re.match(r"(.*)\(\s*\*\s*\w+\s*\)\s*\((.*)\)\s*$", text)
    if not m:
        return text
    ret, params = m.group(1).strip(), m.group(2)
    norm = []
    for p in split_top(params.split()):
        if len(p) > 1 and re.match(r"[A-Za-z_]\w*$", p[-1]) and p[-1] not in C_TYPE_WORDS:
            p = p[:-1]
        norm.append(" ".join(p))
    return ret + " (*)(" + ", ".join(norm) + ")"


# --------------------------------------------------------------------------
# Prototypes via gcc -aux-info (normalised declarations of every function).
# --------------------------------------------------------------------------

AUX = re.compile(r"^/\* (.*?):(\d+):\w+ \*/ (.*);\s*$")


def prototypes(cc, flags, include_line, scope_dir, workdir, tag):
    aux = os.path.join(workdir, tag + ".aux")
    src = os.path.join(workdir, tag + "_aux.c")
    with open(src, "w") as f:
        f.write(include_line + "\n")
    # -aux-info is a GCC option; with another compiler fall back to gcc.
    errors = ""
    for compiler in (cc, ["gcc"]):
        if os.path.exists(aux):
            os.remove(aux)
        res = run(compiler + flags + ["-fsyntax-only", "-aux-info", aux, src])
        errors += res.stderr
        if res.returncode == 0 and os.path.exists(aux):
            break
    else:
        sys.exit("listing prototypes (gcc -aux-info) failed:\n" + errors)
    scope = os.path.realpath(scope_dir) + os.sep
    out = {}
    with open(aux) as f:
        for line in f:
            m = AUX.match(line)
            if not m or not os.path.realpath(m.group(1)).startswith(scope):
                continue
            decl = re.sub(r"\s+", " ", m.group(3)).strip()
            decl = re.sub(r"^extern ", "", decl)
            nm = re.search(r"(\w+) \(", decl)
            if nm:
                out[nm.group(1)] = decl
    if not out:
        sys.exit("no prototypes found for %s: refusing to skip the comparison" % tag)
    return out


# --------------------------------------------------------------------------
# Key <-> C expression
# --------------------------------------------------------------------------

def c_expr(key):
    kind, _, rest = key.partition(":")
    if kind == "enum":
        return "(long long)(%s)" % rest
    if kind == "macro":
        return "(long long)(intptr_t)(%s)" % rest
    if kind == "sizeof":
        return "(long long)sizeof(%s)" % rest
    if kind == "alignof":
        return "(long long)offsetof(struct { char c; %s x; }, x)" % rest
    typ, _, path = rest.partition(":")
    if kind == "offsetof":
        return "(long long)offsetof(%s, %s)" % (typ, path)
    if kind == "fieldsize":
        return "(long long)sizeof(((%s*)0)->%s)" % (typ, path)
    raise ValueError(key)


def gather(hdr):
    """All compile-time keys one header can answer."""
    keys = set()
    for e in hdr.enumerators:
        keys.add("enum:" + e)
    for name in hdr.macros:
        keys.add("macro:" + name)
    for t in hdr.enum_types:
        keys.add("sizeof:" + t)
    for t, fields in hdr.records.items():
        keys.add("sizeof:" + t)
        keys.add("alignof:" + t)
        for path, bf in fields:
            if not bf:
                keys.add("offsetof:%s:%s" % (t, path))
                keys.add("fieldsize:%s:%s" % (t, path))
    for name, (kind, _) in hdr.typedefs.items():
        if kind in ("complete", "fnptr"):
            keys.add("sizeof:" + name)
    return keys


def dump_program(keys, include_line):
    lines = [include_line, "#include <stddef.h>", "#include <stdint.h>",
             "#include <stdio.h>", "int main(void) {"]
    for k in sorted(keys):
        lines.append('  printf("%%s\\t%%lld\\n", "%s", %s);' % (k, c_expr(k)))
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def build_and_run(cc, flags, source, workdir, tag):
    src = os.path.join(workdir, tag + "_dump.c")
    exe = os.path.join(workdir, tag + "_dump")
    with open(src, "w") as f:
        f.write(source)
    res = run(cc + flags + ["-o", exe, src])
    if res.returncode != 0:
        sys.exit("compiling %s failed:\n%s" % (src, res.stderr[-6000:]))
    res = run([exe])
    if res.returncode != 0:
        sys.exit("%s failed:\n%s" % (exe, res.stderr))
    values = {}
    for line in res.stdout.splitlines():
        k, _, v = line.partition("\t")
        values[k] = int(v)
    return values


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours-include", required=True)
    ap.add_argument("--fetch", required=True, help="fetch-amd-header.sh")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--verbose", action="store_true",
                    help="list every compared entry and every hipxx-only key")
    ap.add_argument("cc", nargs="+", help="C compiler command (after --)")
    args = ap.parse_args()

    cc = args.cc
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)

    # 1. The reference header.
    amd_root = os.path.join(workdir, "amd")
    res = run(["sh", args.fetch, amd_root])
    sys.stderr.write(res.stderr)
    if res.returncode != 0:
        print("FAIL: could not obtain the AMD reference header (see above)")
        return 1
    amd_inc = os.path.join(amd_root, "root", "usr", "include")
    try:
        with open(os.path.join(amd_root, "version.txt")) as f:
            amd_version = f.read().strip()
    except OSError:
        amd_version = "unknown"
    print("reference: Debian libamdhip64-dev %s (%s)" % (amd_version, amd_inc))

    ours_inc = os.path.abspath(args.ours_include)
    sides = {
        "hipxx": dict(flags=["-std=c99", "-I" + ours_inc],
                      include="#include <hipxx/hip_runtime_api.h>",
                      scope=ours_inc),
        "amd": dict(flags=["-std=gnu11", "-w", "-D__HIP_PLATFORM_AMD__", "-I" + amd_inc],
                    include="#include <hip/hip_runtime_api.h>",
                    scope=os.path.join(amd_inc, "hip")),
    }

    # 2. Parse both.
    hdrs = {}
    for name, s in sides.items():
        text, macros = preprocess(cc, s["flags"], s["include"], s["scope"])
        h = Header()
        parse_header(text, h)
        h.macros = macros
        h.protos = prototypes(cc, s["flags"], s["include"], s["scope"], workdir, name)
        hdrs[name] = h
    ours, amd = hdrs["hipxx"], hdrs["amd"]

    ours_keys, amd_keys = gather(ours), gather(amd)
    # Macros that only exist to build the header itself are not API.
    for keys in (ours_keys, amd_keys):
        for k in list(keys):
            if k.startswith("macro:") and (k.startswith("macro:HIPXX_")
                                           or k.endswith("_H")):
                keys.discard(k)

    common = ours_keys & amd_keys
    pairs = {k: k for k in common}                  # hipxx key -> amd key
    for ok, ak in RENAMED.items():
        if ak in amd_keys:
            pairs[ok] = ak
            if ok not in ours_keys:
                print("FAIL: renamed key %s is not declared by hipxx" % ok)
                return 1

    ours_wanted = set(pairs) | set(k for k in ALLOWED if not k.startswith("proto:"))
    missing_allowed = [k for k in ours_wanted if k not in ours_keys]
    amd_wanted = set(pairs.values())

    # 3. Dump values.
    ours_vals = build_and_run(cc, sides["hipxx"]["flags"],
                              dump_program(ours_wanted - set(missing_allowed),
                                           sides["hipxx"]["include"]),
                              workdir, "hipxx")
    amd_vals = build_and_run(cc, sides["amd"]["flags"],
                             dump_program(amd_wanted, sides["amd"]["include"]),
                             workdir, "amd")

    # Prototypes and callback typedefs are compared as normalised text.
    for fn in sorted(set(ours.protos) & set(amd.protos)):
        k = "proto:" + fn
        ours_vals[k] = ours.protos[fn]
        amd_vals[k] = amd.protos[fn]
        pairs[k] = k
    for name in sorted(set(ours.typedefs) & set(amd.typedefs)):
        if ours.typedefs[name][0] == "fnptr" and amd.typedefs[name][0] == "fnptr":
            k = "signature:" + name
            ours_vals[k] = fnptr_signature(ours.typedefs[name][1])
            amd_vals[k] = fnptr_signature(amd.typedefs[name][1])
            pairs[k] = k

    # 4. Compare.
    failures, allowed_hits, matched = [], [], 0
    for k in sorted(missing_allowed):
        failures.append("%s: allowlisted but hipxx does not declare it" % k)
    for ok in sorted(pairs):
        ak = pairs[ok]
        ov, av = ours_vals.get(ok), amd_vals.get(ak)
        label = ok if ok == ak else "%s (ROCm 5.2: %s)" % (ok, ak)
        if ok in ALLOWED:
            want, why = ALLOWED[ok]
            if ov != want:
                failures.append("%s: hipxx=%r, expected current AMD value %r (%s)"
                                % (label, ov, want, why))
            else:
                allowed_hits.append("%s: hipxx=%r, reference=%r -- %s%s"
                                    % (label, ov, av, why,
                                       "" if av != ov else " [entry not needed for this reference]"))
            continue
        if args.verbose:
            print("  %-70s hipxx=%r reference=%r" % (label, ov, av))
        if ov == av:
            matched += 1
        else:
            failures.append("%s: hipxx=%r reference=%r" % (label, ov, av))
    # Allowlisted keys the reference does not declare still pin hipxx's value.
    for k in sorted(set(ALLOWED) - set(pairs) - set(missing_allowed)):
        want, why = ALLOWED[k]
        ov = ours_vals.get(k)
        if ov != want:
            failures.append("%s: hipxx=%r, expected current AMD value %r (%s)" % (k, ov, want, why))
        else:
            allowed_hits.append("%s: hipxx=%r (reference lacks it) -- %s" % (k, ov, why))

    kinds = {}
    for k in pairs:
        kinds[k.split(":")[0]] = kinds.get(k.split(":")[0], 0) + 1
    print("compared %d entries present in both headers: %s"
          % (len(pairs), ", ".join("%s=%d" % kv for kv in sorted(kinds.items()))))
    only_ours = sorted(ours_keys - set(pairs))
    print("only in hipxx (not compared here; see abi_c99.c): %d keys" % len(only_ours))
    if args.verbose:
        for k in only_ours:
            print("  " + k)
    print("allowlisted (value pinned to current AMD):")
    for line in allowed_hits:
        print("  " + line)
    if failures:
        print("MISMATCHES:")
        for line in failures:
            print("  " + line)
    print("abi-vs-amd: %d matched, %d allowlisted, %d mismatched"
          % (matched, len(allowed_hits), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
