def safe_resolve(repo_root, rel_path):
    if not isinstance(rel_path, str) or "\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
        raise ValueError(f"refused path {str(rel_path)[:80]!r}")
    root = Path(os.path.abspath(repo_root))
    target = Path(os.path.normpath(os.path.join(root, rel_path)))
    if not target.is_relative_to(root):
        raise ValueError(f"{rel_path!r} is outside the repository")
    return target
