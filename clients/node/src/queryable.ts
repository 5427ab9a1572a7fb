/**
 * The one connection type every module takes, in a module of its own so that
 * internal.ts (the transport) and version.ts (the version check it runs) both
 * import it without importing each other.
 */
import type pg from 'pg'

/** Anything with node-postgres' `query(text, values)`: a `pg.Pool` normally. */
export interface Queryable {
  query: pg.Pool['query']
}
