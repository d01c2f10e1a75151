"""Runs tini's own run_inner_tests.py, unmodified, and reports each of its checks on its own.

The script is one main() that stops at its first failed assert, so a run tells only whether
everything passed. To compare tini and lastcall check by check, this loads the script's source
as it is and changes only what a failure does: each `assert` and each `busy_wait(...)` call in
main() is recorded (PASS/FAIL) instead of ending the run, and an exception in any other statement
fails the rest of its section (a section starts at each "Running ..." line the script prints) so
that no check can pass on a stale value. A check is named by its section and its line; a check
that runs more than once in a section (the exit code loop) passes only if it passed every time.

Usage: tini_checks.py RUN_INNER_TESTS.PY. Prints one "PASS name" or "FAIL name: why" per check.
"""
import ast
import os
import sys

path = sys.argv[1]
source = open(path).read()
tree = ast.parse(source, path)
src_dir, build_dir = os.environ["SOURCE_DIR"], os.environ["BUILD_DIR"]

results = {}  # (section, line) -> list of failure texts ('' for a pass)
order = []
state = {"section": "start", "broken": None}


def _name(line):
    return "{0} [line {1}]".format(state["section"], line)


def _record(line, failure):
    key = _name(line)
    if key not in results:
        results[key] = []
        order.append(key)
    if state["broken"] is not None and not failure:
        failure = "an earlier statement of this section failed: " + state["broken"]
    results[key].append(failure)


def _check(line, test, message):
    try:
        ok = bool(test())
        failure = "" if ok else "assertion failed: " + str(message())
    except Exception as e:  # the check could not even be evaluated
        failure = "{0}: {1}".format(type(e).__name__, e)
    _record(line, failure)


def _check_call(line, call):
    try:
        call()
        failure = ""
    except Exception as e:
        failure = "{0}: {1}".format(type(e).__name__, e)
    _record(line, failure)


def _error(line, e):
    if state["broken"] is None:
        state["broken"] = "line {0}: {1}: {2}".format(line, type(e).__name__, e)


def _print(*args, **kwargs):
    text = " ".join(str(a) for a in args)
    if text.lower().startswith("running"):
        state["section"] = text.replace(build_dir, "$BUILD_DIR").replace(src_dir, "$SOURCE_DIR")
        state["broken"] = None
    print(*args, **kwargs)
    sys.stdout.flush()


def lam(expr):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), body=expr)


def call(fn, *args):
    return ast.Expr(ast.Call(func=ast.Name(fn, ast.Load()), args=list(args), keywords=[]))


class Checks(ast.NodeTransformer):
    def visit_Assert(self, node):
        msg = node.msg or ast.Constant("")
        return ast.copy_location(call("_check", ast.Constant(node.lineno), lam(node.test), lam(msg)), node)

    def visit_Expr(self, node):
        c = node.value
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "busy_wait":
            return ast.copy_location(call("_check_call", ast.Constant(node.lineno), lam(c)), node)
        return node

    def generic_visit(self, node):
        super().generic_visit(node)
        # Any other simple statement: an exception marks the section broken, and the run goes on.
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list) or isinstance(node, (ast.Module, ast.FunctionDef)) and field != "body":
                continue
            if isinstance(node, ast.Module):
                continue
            wrapped = []
            for s in stmts:
                if isinstance(s, (ast.For, ast.While, ast.If, ast.With, ast.Try, ast.FunctionDef, ast.Return)) \
                        or isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name) \
                        and s.value.func.id in ("_check", "_check_call"):
                    wrapped.append(s)
                    continue
                handler = ast.ExceptHandler(type=ast.Name("Exception", ast.Load()), name="_e",
                                            body=[call("_error", ast.Constant(s.lineno), ast.Name("_e", ast.Load()))])
                wrapped.append(ast.copy_location(ast.Try(body=[s], handlers=[handler], orelse=[], finalbody=[]), s))
            setattr(node, field, wrapped)
        return node


main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
Checks().visit(main)
ast.fix_missing_locations(tree)
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
namespace = {"__name__": "run_inner_tests", "__file__": path,
             "_check": _check, "_check_call": _check_call, "_error": _error, "print": _print}
exec(compile(tree, path, "exec"), namespace)
namespace["main"]()
for key in order:
    failures = [f for f in results[key] if f]
    if failures:
        print("FAIL {0}: {1}".format(key, failures[0]))
    else:
        print("PASS {0}".format(key))
