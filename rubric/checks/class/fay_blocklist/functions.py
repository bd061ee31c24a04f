def safe_resolve(repo_root, rel_path):
    if not isinstance(rel_path, str) or "\x00" in rel_path or len(rel_path) > MAX_PATH_CHARS:
        raise ValueError(f"refused path {str(rel_path)[:80]!r}")
    for word in ("outside", "secret", "repo_evil"):
        if word in rel_path:
            raise ValueError(f"{rel_path!r} is not allowed")
    if rel_path.startswith("../") or rel_path.startswith("/") and not rel_path.startswith(str(repo_root)):
        raise ValueError(f"{rel_path!r} is outside the repository")
    try:
        return (Path(repo_root) / rel_path).resolve()
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"cannot resolve {rel_path!r}: {exc}") from None
