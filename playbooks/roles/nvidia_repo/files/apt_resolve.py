#!/usr/bin/env python3
"""Check mode's package resolution: would apt install these packages, from the node's
apt sources plus the ones the play is about to add?

    python3 apt_resolve.py BASE64_JSON
    {"steps": [["nvidia-driver-pinning-580"], ["nvidia-open"]],
     "sources": [{"deb": "URL of a keyring package such as cuda-keyring"},
                 {"list": "deb [signed-by=PATH] URI /", "keys": {"PATH": "key URL"}}]}

Everything happens in a temporary folder (its own source list, package lists, cache and
preferences); the node's apt state is read, never written. Each step is simulated with
`apt-get install -s`; the apt preferences that the step's packages ship (a version lock)
apply to the steps after it, as they would after a real install. Exit status and the
last line are apt's: "E: Unable to locate package X" names what does not resolve.
"""

import base64
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

APT_DIR = "/etc/apt"


def fetch(url, dest):
    with urllib.request.urlopen(url, timeout=120) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out)


def apt(options, *args, cwd=None):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    argv = ["apt-get", "-q", *options, *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, check=False)


def _rooted(text, root):
    """A source list whose signed-by keyrings are looked up under root instead of /."""
    text = re.sub(r"(signed-by=)(/\S+?)([\] ])", lambda m: m[1] + root + m[2] + m[3], text)
    return re.sub(r"(?m)^(Signed-By:\s*)(/\S+)", lambda m: m[1] + root + m[2], text)


def add_sources(spec, tmp, parts):
    """Copy the node's sources, then add the pending ones (keys kept in tmp)."""
    for path in glob.glob(f"{APT_DIR}/sources.list.d/*"):
        if path.endswith((".list", ".sources")):
            shutil.copy(path, parts)
    for i, source in enumerate(spec.get("sources", [])):
        if "deb" in source:  # a keyring package: its source list, its keyring
            unpacked = os.path.join(tmp, f"pkg{i}")
            deb = os.path.join(tmp, f"pkg{i}.deb")
            fetch(source["deb"], deb)
            subprocess.run(["dpkg-deb", "-x", deb, unpacked], check=True)
            for path in glob.glob(f"{unpacked}/etc/apt/sources.list.d/*"):
                with open(path) as f:
                    text = _rooted(f.read(), unpacked)
                with open(os.path.join(parts, f"pending{i}-{os.path.basename(path)}"), "w") as f:
                    f.write(text)
        if "list" in source:  # a source line and the keys it names
            line = source["list"]
            for j, (path, url) in enumerate(sorted(source.get("keys", {}).items())):
                key = os.path.join(tmp, f"key{i}-{j}.asc")
                fetch(url, key)
                line = line.replace(path, key)
            with open(os.path.join(parts, f"pending{i}.list"), "w") as f:
                f.write(line + "\n")


def _lines(proc, prefixes):
    return [x for x in (proc.stdout + proc.stderr).splitlines() if x.startswith(prefixes)]


def main():
    spec = json.loads(base64.b64decode(sys.argv[1]))
    tmp = tempfile.mkdtemp(prefix="bringup-resolve-")
    try:
        parts = os.path.join(tmp, "sources.list.d")
        prefs = os.path.join(tmp, "preferences.d")
        for sub in ("sources.list.d", "preferences.d", "lists/partial", "cache/archives/partial"):
            os.makedirs(os.path.join(tmp, sub))
        for path in glob.glob(f"{APT_DIR}/preferences.d/*"):
            shutil.copy(path, prefs)
        add_sources(spec, tmp, parts)
        main_list = f"{APT_DIR}/sources.list"
        options = [
            "-o",
            f"Dir::Etc::SourceList={main_list if os.path.exists(main_list) else '/dev/null'}",
            "-o",
            f"Dir::Etc::SourceParts={parts}",
            "-o",
            f"Dir::Etc::PreferencesParts={prefs}",
            "-o",
            f"Dir::State::Lists={tmp}/lists",
            "-o",
            f"Dir::Cache={tmp}/cache",
            "-o",
            "APT::Sandbox::User=root",
            "-o",
            "Debug::NoLocking=1",
        ]
        update = apt(options, "update")
        if update.returncode != 0 or _lines(update, ("E:", "W:")):
            print(update.stdout + update.stderr, file=sys.stderr)
            sys.exit(update.returncode or 100)
        for step in spec["steps"]:
            simulated = apt(options, "-s", "--no-install-recommends", "install", *step)
            print(f"$ apt-get install -s {' '.join(step)}")
            print("\n".join(_lines(simulated, ("Inst ", "Remv "))))
            if simulated.returncode != 0:
                print(simulated.stdout, file=sys.stderr)
                print(simulated.stderr.strip(), file=sys.stderr)
                sys.exit(simulated.returncode)
            # The step's own packages' apt preferences apply from now on (a version lock).
            names = [re.split(r"[=/]", spec_)[0] for spec_ in step]
            downloads = os.path.join(tmp, "downloads")
            os.makedirs(downloads, exist_ok=True)
            got = apt(options, "download", *names, cwd=downloads)
            for deb in glob.glob(os.path.join(downloads, "*.deb")):
                unpacked = os.path.join(tmp, "step")
                subprocess.run(["dpkg-deb", "-x", deb, unpacked], check=True)
                for path in glob.glob(f"{unpacked}/etc/apt/preferences.d/*"):
                    shutil.copy(path, prefs)
                shutil.rmtree(unpacked)
                os.unlink(deb)
            if got.returncode != 0:
                print(got.stderr.strip(), file=sys.stderr)
                sys.exit(got.returncode)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
