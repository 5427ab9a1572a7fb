-- sandbox_persist 0.4.0 -> 0.5.0. ALTER EXTENSION sandbox_persist UPDATE runs
-- it on a 0.4.0 database (after the earlier scripts on older ones); a fresh
-- install runs the full script built from sql/sandbox_persist.sql instead.
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
