def safe_resolve(repo_root, rel_path):
    if not isinstance(rel_path, str) or "\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
        raise ValueError(f"refused path {str(rel_path)[:80]!r}")
    try:
        root = Path(repo_root).resolve()
        target = (root / rel_path).resolve()
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"cannot resolve {rel_path!r}: {exc}") from None
    try:
        target.relative_to(root)
    except ValueError:
        raise ValueError(f"{rel_path!r} is outside the repository") from None
    return target
