/**
 * SQLSTATE -> HTTP status for the stream functions (docs/contract/streams.md
 * §5): the generated table of src/error_codes.ts (from SP_HTTP_STATUS_TABLE
 * in the extension's src/errors.h), the one home of the mapping.
 */
import { HTTP_STATUS } from '../error_codes.js'

/** The HTTP status of a stream function's SQLSTATE, or undefined for anything else (a 500). */
export function httpStatusOfSqlState(sqlstate: string | undefined): number | undefined {
  return sqlstate === undefined ? undefined : HTTP_STATUS[sqlstate]
}
