-- sandbox_persist 0.3.0 -> 0.4.0. CREATE EXTENSION runs 0.1.0, the upgrade
-- scripts up to 0.3.0 and then this one; ALTER EXTENSION sandbox_persist
-- UPDATE runs it on a 0.3.0 database (after the earlier scripts on older ones).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
