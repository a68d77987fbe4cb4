#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

"""Finishes a Debian package that CPack made (scripts/package.sh runs it on each one):

  - drops the postinst and postrm scripts CPack adds to a library package when all they do is
    run ldconfig: the package's ldconfig trigger (DEBIAN/triggers) does that, as Debian policy
    asks (lintian: maintscript-calls-ldconfig);
  - writes the Installed-Size dpkg-gencontrol would: each regular file and symlink counted as
    its size rounded up to KiB, every other entry (a directory) as 1 KiB;
  - raises the libc6 dependency to 2.36 when an ELF file needs GLIBC_ABI_DT_RELR (packed
    relocations): dpkg-shlibdeps sees symbols only, and the loader of an older glibc refuses such
    a library;
  - writes DEBIAN/md5sums from the files themselves (CPack's for the debug-symbols package
    names its build directory);
  - gives the debug-symbols package (Package-Type: ddeb) /usr/share/doc/<package>-dbgsym as a
    link to its library package's directory, as debhelper does.

    deb_finish.py PACKAGE...
"""
import hashlib
import math
import os
import re
import subprocess
import sys
import tempfile


def installed_size(root):
    """KiB, as dpkg-gencontrol counts: the package root and every directory 1, every regular file
    and symlink its size rounded up to KiB (hard links once); DEBIAN/ not at all."""
    total, seen = 1, set()
    for directory, subdirs, files in os.walk(root):
        if directory == root:
            subdirs[:] = [d for d in subdirs if d != "DEBIAN"]
        for name in subdirs + files:
            info = os.lstat(os.path.join(directory, name))
            if (info.st_dev, info.st_ino) in seen:
                continue
            if info.st_nlink > 1:
                seen.add((info.st_dev, info.st_ino))
            regular = not os.path.isdir(os.path.join(directory, name)) or os.path.islink(os.path.join(directory, name))
            total += math.ceil(info.st_size / 1024) if regular else 1
    return total


def only_ldconfig(script):
    commands = [line.strip() for line in open(script, encoding="utf-8")
                if line.strip() and not line.lstrip().startswith("#")]
    commands = [c for c in commands if c not in ("set -e", "exit 0")]
    return all(re.fullmatch(r'(if \[ "\$1" = "\w+" \]; then|fi|ldconfig)', c) for c in commands)


def needs_dt_relr(root):
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            if os.path.islink(path) or open(path, "rb").read(4) != b"\x7fELF":
                continue
            out = subprocess.run(["readelf", "-V", "-W", path], capture_output=True, text=True).stdout
            if "GLIBC_ABI_DT_RELR" in out:
                return True
    return False


def raise_libc6(depends, minimum):
    def replace(match):
        version = match.group(1)
        newer = [int(p) for p in version.split(".")] < [int(p) for p in minimum.split(".")]
        return f"libc6 (>= {minimum if newer else version})"
    return re.sub(r"libc6 \(>= ([0-9.]+)\)", replace, depends)


def md5sums(root):
    lines = []
    for directory, subdirs, files in os.walk(root):
        if directory == root:
            subdirs[:] = [d for d in subdirs if d != "DEBIAN"]
        for name in sorted(files):
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                digest = hashlib.md5(open(path, "rb").read()).hexdigest()
                lines.append(f"{digest}  {os.path.relpath(path, root)}\n")
    return "".join(sorted(lines, key=lambda line: line[34:]))


def finish(deb):
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "root")
        subprocess.run(["dpkg-deb", "-R", deb, root], check=True)
        control_dir = os.path.join(root, "DEBIAN")
        for script in ("postinst", "postrm"):
            path = os.path.join(control_dir, script)
            if os.path.exists(path) and only_ldconfig(path):
                os.remove(path)
        control_path = os.path.join(control_dir, "control")
        control = open(control_path, encoding="utf-8").read()
        package = re.search(r"^Package: (\S+)", control, re.M).group(1)
        if re.search(r"^Package-Type: ddeb$", control, re.M) and package.endswith("-dbgsym"):
            doc = os.path.join(root, "usr", "share", "doc")
            os.makedirs(doc, exist_ok=True)
            os.symlink(package[:-len("-dbgsym")], os.path.join(doc, package))
        if needs_dt_relr(root):
            control = re.sub(r"^(Depends: .*)$", lambda m: raise_libc6(m.group(1), "2.36"), control, flags=re.M)
        with open(os.path.join(control_dir, "md5sums"), "w", encoding="utf-8") as f:
            f.write(md5sums(root))
        size = installed_size(root)
        control = re.sub(r"^Installed-Size: .*$", f"Installed-Size: {size}", control, flags=re.M)
        with open(control_path, "w", encoding="utf-8") as f:
            f.write(control)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", root, deb],
                       check=True, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    for package in sys.argv[1:]:
        finish(package)
