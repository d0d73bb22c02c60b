"""NVIDIA data-center GPUs by PCI device id, and the shipped profile of each.

A driver older than its GPU prints the GPU's name as "NVIDIA Graphics Device" (a GB200
NVL72 nccl-tests run on such a driver shows exactly that); the PCI device id still names
the GPU. The names below are the PCI ID Repository's (`pci.ids`, the database `lspci`
reads and Debian ships in its `pci.ids` / `hwdata` packages; https://pci-ids.ucw.cz/),
taken from its repository https://github.com/pciutils/pciids at commit
c1c12547d626ebf05fd0223144ad87fab5e95d06 (pci.ids version 2026.08.22): every device of
vendor 10de on the data-center chips GA100, GH100, GB100, GB102, GB110 and GR100, built
with

    git show c1c12547:pci.ids | awk '/^10de/{f=1;next} /^[0-9a-f]/{f=0} f' \
        | grep -P '^\t(20b|23|29|30|31)[0-9a-f]+ '

Each id maps to the shipped profile of that GPU where there is one, by the same rule as
the name (docs/profiles.md): the profile of the model, else of its family (an A100 40GB
is judged by a100 and fails its memory floor). Standard library only: the node side may
name a GPU by it too. docs/reference.md#pci-device-ids.
"""

from __future__ import annotations

# What a driver prints for a GPU it does not know by name.
GENERIC_NAMES = frozenset({"NVIDIA Graphics Device", "Graphics Device"})

# "0x2941": ("GB100 [HGX GB200]", "gb200"): pci.ids's name, and the profile (None: none).
DEVICE_IDS: dict[str, tuple[str, str | None]] = {
    "0x20b0": ("GA100 [A100 SXM4 40GB]", "a100"),
    "0x20b1": ("GA100 [A100 PCIe 40GB]", "a100"),
    "0x20b2": ("GA100 [A100 SXM4 80GB]", "a100"),
    "0x20b3": ("GA100 [A100-SXM-64GB]", "a100"),
    "0x20b4": ("GA100", None),
    "0x20b5": ("GA100 [A100 PCIe 80GB]", "a100"),
    "0x20b6": ("GA100GL [PG506-232]", None),
    "0x20b7": ("GA100GL [A30 PCIe]", None),
    "0x20b8": ("GA100 [A100X]", None),
    "0x20b9": ("GA100 [A30X]", None),
    "0x20bb": ("GA100 [DRIVE A100 PROD]", None),
    "0x20bd": ("GA100 [A800 SXM4 40GB]", None),
    "0x20be": ("GA100 [GRID A100A]", None),
    "0x20bf": ("GA100 [GRID A100B]", None),
    "0x2302": ("GH100", None),
    "0x230c": ("GH100 [H20 NVL16]", None),
    "0x230e": ("GH100 [H20 NVL16]", None),
    "0x2313": ("GH100 [H100 CNX]", None),
    "0x2321": ("GH100 [H100L 94GB]", "h100"),
    "0x2322": ("GH100 [H800 PCIe]", None),
    "0x2324": ("GH100 [H800]", None),
    "0x2328": ("GH100 [H20B]", None),
    "0x2329": ("GH100 [H20]", None),
    "0x232c": ("GH100 [H20 HBM3e]", None),
    "0x2330": ("GH100 [H100 SXM5 80GB]", "h100"),
    "0x2331": ("GH100 [H100 PCIe]", "h100"),
    "0x2335": ("GH100 [H200 SXM 141GB]", "h200"),
    "0x2336": ("GH100 [H100]", "h100"),
    "0x2337": ("GH100 [H100 SXM5 64GB]", "h100"),
    "0x2338": ("GH100 [H100 SXM5 96GB]", "h100"),
    "0x2339": ("GH100 [H100 SXM5 94GB]", "h100"),
    "0x233a": ("GH100 [H800L 94GB]", None),
    "0x233b": ("GH100 [H200 NVL]", "h200"),
    "0x233d": ("GH100 [H100 96GB]", "h100"),
    "0x2342": ("GH100 [GH200 120GB / 480GB]", None),
    "0x2343": ("GH100", None),
    "0x2345": ("GH100 [GH100-88K-A1]", None),
    "0x2348": ("GH100 [GH200 144G HBM3e]", None),
    "0x237e": ("GH100 [H100 GH3]", None),
    "0x237f": ("GH100 [Skinny Joe]", None),
    "0x23b0": ("GH100", None),
    "0x23f0": ("GH100", None),
    "0x2900": ("GB100 [Reserved Dev ID A]", None),
    "0x2901": ("GB100 [B200]", "b200"),
    "0x2909": ("GB100 [HGX B200 168GB]", "b200"),
    "0x2920": ("GB100 [TS4 / B100]", None),
    "0x2924": ("GB100", None),
    "0x2925": ("GB100", None),
    "0x293d": ("GB100", None),
    "0x2940": ("GB100 [Reserved Dev ID B]", None),
    "0x2941": ("GB100 [HGX GB200]", "gb200"),
    "0x297e": ("GB100", None),
    "0x2980": ("GB102 [Reserved Dev ID A]", None),
    "0x29bb": ("GB102 [DRIVE P2021]", None),
    "0x29bc": ("GB102 [B100]", None),
    "0x29c0": ("GB102 [Reserved Dev ID B]", None),
    "0x29f1": ("GB102", None),
    "0x3000": ("GR100 [Reserved Dev ID A]", None),
    "0x3021": ("GR100 [PCIe Faber]", None),
    "0x3040": ("GR100 [Reserved Dev ID B]", None),
    "0x30c0": ("GR102", None),
    "0x3180": ("GB110 [Reserved Dev ID A]", None),
    "0x3182": ("GB110 [B300 SXM6 AC]", "b300"),
    "0x31a1": ("GB110 [GB300 MaxQ]", None),
    "0x31c0": ("GB110 [Reserved Dev ID B]", None),
    "0x31c2": ("GB110 [GB300]", "gb300"),
    "0x31c3": ("GB110 [GB300]", "gb300"),
    "0x31fe": ("GB110", None),
}


def normal(device_id: str | None) -> str | None:
    """A device id however a tool prints it ("0x294110DE", "0x2941", "2941") as "0x2941";
    None when it is not one."""
    if not device_id:
        return None
    text = device_id.strip().lower().removeprefix("0x")
    if len(text) == 8 and text.endswith("10de"):  # nvidia-smi appends the vendor
        text = text[:4]
    if len(text) != 4 or any(c not in "0123456789abcdef" for c in text):
        return None
    return "0x" + text


def pci_name(device_id: str | None) -> str | None:
    """What pci.ids calls the device ("GB100 [HGX GB200]"), or None when it is not listed."""
    key = normal(device_id)
    return DEVICE_IDS[key][0] if key in DEVICE_IDS else None


def profile_name(device_id: str | None) -> str | None:
    """The shipped profile of the GPU with this PCI device id, or None when none fits."""
    key = normal(device_id)
    return DEVICE_IDS[key][1] if key in DEVICE_IDS else None


def is_generic(name: str | None) -> bool:
    """The name a driver gives a GPU it does not know (the device id then names it)."""
    return (name or "").strip() in GENERIC_NAMES
