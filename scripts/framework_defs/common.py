"""Helpers shared by the framework-definition extractors: read a file of a bare git repository at a
commit, and evaluate literal Python expressions from its AST."""
import ast
import subprocess


def git_show(git_dir, commit, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def git_grep_class(git_dir, commit, name, under):
    r = subprocess.run(["git", "--git-dir", git_dir, "grep", "-l", "-E", f"^class {name}\\b",
                        commit, "--", f"{under}*.py"], capture_output=True, text=True)
    return [line.split(":", 1)[1] for line in r.stdout.splitlines() if ":" in line]


def commit_date(git_dir, commit):
    return subprocess.run(["git", "--git-dir", git_dir, "log", "-1", "--format=%cs", commit],
                          check=True, capture_output=True, text=True).stdout.strip()


def full_commit(git_dir, commit):
    return subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit + "^{commit}"],
                          check=True, capture_output=True, text=True).stdout.strip()


def literal(node):
    """ast.literal_eval, also for negative numbers and tuples; ValueError otherwise."""
    return ast.literal_eval(node)


def value(node):
    """A literal's value, or the expression's source text for anything else (a default such as
    torch.float32 or AttnBackend.auto), marked as such."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return {"expr": ast.unparse(node)}


def header(framework, repo, git_dir, commit, files, script):
    return {
        "framework": framework,
        "repository": repo,
        "ref": commit,
        "commit": full_commit(git_dir, commit),
        "commit_date": commit_date(git_dir, commit),
        "source_files": files,
        "extracted_by": script,
    }


def class_defs(source):
    """{class name: ast.ClassDef} of a module's top-level classes."""
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}


def dataclass_fields(cls_node, classes=None):
    """The annotated fields of a dataclass body, base classes of the same module first:
    [{name, annotation (source text), required, default}]. `default` is the literal default, the
    name of a default_factory class, [] for list factories, or {"expr": text}."""
    out = []
    classes = classes or {}
    for b in cls_node.bases:
        if isinstance(b, ast.Name) and b.id in classes:
            out = dataclass_fields(classes[b.id], classes)
    names = {f["name"]: i for i, f in enumerate(out)}
    for stmt in cls_node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        ann = ast.unparse(stmt.annotation)
        if ann.startswith("ClassVar"):
            continue
        f = {"name": stmt.target.id, "annotation": ann, "required": stmt.value is None}
        v = stmt.value
        if v is not None:
            if isinstance(v, ast.Call) and getattr(v.func, "id", "") == "field":
                kw = {k.arg: k.value for k in v.keywords}
                if "default" in kw:
                    f["default"] = value(kw["default"])
                elif "default_factory" in kw:
                    fac = kw["default_factory"]
                    if isinstance(fac, ast.Name):
                        f["default"] = [] if fac.id == "list" else ({} if fac.id == "dict"
                                                                  else {"factory": fac.id})
                    elif isinstance(fac, ast.Lambda):
                        f["default"] = value(fac.body)
                    else:
                        f["default"] = {"expr": ast.unparse(fac)}
                else:
                    f["required"] = True
            else:
                f["default"] = value(v)
        if f["name"] in names:
            out[names[f["name"]]] = f
        else:
            names[f["name"]] = len(out)
            out.append(f)
    return out


def call_kwargs(call):
    """Keyword arguments of a constructor call, nested calls as {"call": name, "kwargs": ...}."""
    out = {}
    for k in call.keywords:
        if isinstance(k.value, ast.Call):
            out[k.arg] = {"call": ast.unparse(k.value.func), "kwargs": call_kwargs(k.value)}
        else:
            out[k.arg] = value(k.value)
    return out
