"""A tiny synthetic UMLS Metathesaurus (MRCONSO.RRF, MRSTY.RRF) written by tests: no real UMLS content."""

from __future__ import annotations

from pathlib import Path

# (CUI, LAT, TS, STT, ISPREF, SAB, TTY, STR, SUPPRESS)
CONSO = [
    ("C0000001", "ENG", "S", "VO", "N", "MSH", "SY", "heart attack", "N"),
    ("C0000001", "ENG", "P", "PF", "Y", "SNOMEDCT_US", "PT", "Myocardial infarction", "N"),
    ("C0000001", "ENG", "S", "PF", "Y", "MSH", "MH", "Infarction, Myocardial", "N"),
    ("C0000001", "FRE", "P", "PF", "Y", "MSHFRE", "MH", "Infarctus du myocarde", "N"),
    ("C0000001", "ENG", "S", "VO", "N", "SNOMEDCT_US", "SY", "heart attack", "N"),
    ("C0000002", "ENG", "P", "PF", "Y", "MSH", "MH", "Aspirin", "N"),
    ("C0000002", "ENG", "S", "VO", "N", "SNOMEDCT_US", "SY", "acetylsalicylic acid", "N"),
    ("C0000002", "ENG", "S", "VO", "N", "SNOMEDCT_US", "SY", "ASA - obsolete", "O"),
    ("C0000003", "ENG", "P", "PF", "N", "SNOMEDCT_US", "PT", "Headache", "N"),
    ("C0000003", "ENG", "S", "VO", "Y", "MSH", "SY", "Cephalalgia", "N"),
    ("C0000004", "ENG", "P", "PF", "Y", "MSH", "MH", "Metformin", "N"),
    ("C0000005", "SPA", "P", "PF", "Y", "MSHSPA", "MH", "Cefalea", "N"),
]
STY = [
    ("C0000001", "T047", "Disease or Syndrome"),
    ("C0000002", "T109", "Organic Chemical"),
    ("C0000002", "T121", "Pharmacologic Substance"),
    ("C0000003", "T184", "Sign or Symptom"),
    ("C0000004", "T121", "Pharmacologic Substance"),
    ("C0000005", "T184", "Sign or Symptom"),
]


def conso_line(n: int, row) -> str:
    cui, lat, ts, stt, ispref, sab, tty, name, sup = row
    return "|".join([cui, lat, ts, f"L{n:07d}", stt, f"S{n:07d}", ispref, f"A{n:07d}", "", "", "", sab, tty,
                     f"code{n}", name, "0", sup, ""]) + "|\n"


def write_umls(folder: Path, conso=CONSO, sty=STY) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    mrconso, mrsty = folder / "MRCONSO.RRF", folder / "MRSTY.RRF"
    mrconso.write_text("".join(conso_line(n, r) for n, r in enumerate(conso)), encoding="utf-8")
    mrsty.write_text("".join(f"{c}|{t}|A1.2|{s}|AT{n:05d}||\n" for n, (c, t, s) in enumerate(sty)), encoding="utf-8")
    return mrconso, mrsty
