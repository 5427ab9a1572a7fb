-- sandbox_persist 0.2.0 -> 0.3.0. CREATE EXTENSION runs 0.1.0, 0.1.0--0.2.0
-- and then this script; ALTER EXTENSION sandbox_persist UPDATE runs it on a
-- 0.2.0 database (and after 0.1.0--0.2.0 on a 0.1.0 one).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
