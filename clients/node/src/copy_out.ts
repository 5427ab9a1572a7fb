/**
 * Rows as raw bytes: `COPY (SELECT ...) TO STDOUT (FORMAT binary)` through
 * node-postgres. A query's result fields reach the app as text (node-postgres
 * decodes every DataRow field as UTF-8), so a `bytea` can only travel as hex
 * or base64 text, to be encoded by the server and decoded here; a COPY's
 * CopyData messages arrive as bytes. The blob reads (blobs.ts) use it: their
 * bodies cross the wire once, at their own size, and are copied once, into a
 * buffer of exactly the field's length.
 */
import type pg from 'pg'

/** The 11-byte signature that opens PostgreSQL's binary COPY format. */
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1')

/** Bytes of the fixed header: the signature, the flags word and the extension length. */
const HEADER_BYTES = SIGNATURE.length + 8

type Step = 'header' | 'extension' | 'count' | 'length' | 'data' | 'end'

/**
 * The rows of a binary COPY stream, parsed as its CopyData messages arrive.
 * Each field is a `Buffer` of its own (never a view into a shared slab or into
 * the driver's read buffer, which it reuses), or null.
 */
export class BinaryCopyRows {
  readonly rows: Array<Array<Buffer | null>> = []
  private step: Step = 'header'
  /** The bytes of a header, count or length word read so far. */
  private word = Buffer.alloc(HEADER_BYTES)
  private wordFilled = 0
  private skip = 0
  private fieldsLeft = 0
  private row: Array<Buffer | null> = []
  private field: Buffer = Buffer.alloc(0)
  private fieldFilled = 0

  /** Take one CopyData message's bytes. */
  push(chunk: Buffer): void {
    let at = 0
    while (at < chunk.length) {
      if (this.step === 'end') throw new Error('binary COPY data after its trailer')
      if (this.step === 'data') {
        const n = Math.min(this.field.length - this.fieldFilled, chunk.length - at)
        chunk.copy(this.field, this.fieldFilled, at, at + n)
        this.fieldFilled += n
        at += n
        if (this.fieldFilled === this.field.length) this.endField(this.field)
        continue
      }
      if (this.step === 'extension') {
        const n = Math.min(this.skip, chunk.length - at)
        this.skip -= n
        at += n
        if (this.skip === 0) this.step = 'count'
        continue
      }
      const need = this.step === 'header' ? HEADER_BYTES : this.step === 'count' ? 2 : 4
      const n = Math.min(need - this.wordFilled, chunk.length - at)
      chunk.copy(this.word, this.wordFilled, at, at + n)
      this.wordFilled += n
      at += n
      if (this.wordFilled === need) {
        this.wordFilled = 0
        this.endWord()
      }
    }
  }

  /** The stream must have ended with its trailer. */
  finish(): Array<Array<Buffer | null>> {
    if (this.step !== 'end') throw new Error('binary COPY data ended before its trailer')
    return this.rows
  }

  private endWord(): void {
    if (this.step === 'header') {
      if (!this.word.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw new Error('binary COPY data without its signature')
      this.skip = this.word.readInt32BE(SIGNATURE.length + 4)
      this.step = this.skip > 0 ? 'extension' : 'count'
    } else if (this.step === 'count') {
      const count = this.word.readInt16BE(0)
      if (count === -1) {
        this.step = 'end'
        return
      }
      this.fieldsLeft = count
      this.row = []
      if (count === 0) this.rows.push(this.row)
      else this.step = 'length'
    } else {
      const length = this.word.readInt32BE(0)
      if (length === -1) this.endField(null)
      else {
        // allocUnsafeSlow: never a slice of Node's shared pool
        this.field = Buffer.allocUnsafeSlow(length)
        this.fieldFilled = 0
        if (length === 0) this.endField(this.field)
        else this.step = 'data'
      }
    }
  }

  private endField(value: Buffer | null): void {
    this.row.push(value)
    this.fieldsLeft -= 1
    if (this.fieldsLeft > 0) this.step = 'length'
    else {
      this.rows.push(this.row)
      this.step = 'count'
    }
  }
}

/**
 * One `COPY ... TO STDOUT (FORMAT binary)` as a node-postgres submittable
 * (`client.query(copy)`, as pg-cursor does): `rows` settles once the server
 * is ready for the next statement, with the rows or the error (a
 * `DatabaseError` like a query's, or the connection's failure).
 */
export class CopyOut implements pg.Submittable {
  readonly rows: Promise<Array<Array<Buffer | null>>>
  private readonly parsed = new BinaryCopyRows()
  private failure: unknown = null
  private settle!: (rows: Array<Array<Buffer | null>>) => void
  private fail!: (error: unknown) => void

  constructor(private readonly text: string) {
    this.rows = new Promise((resolve, reject) => {
      this.settle = resolve
      this.fail = reject
    })
  }

  submit(connection: pg.Connection): void {
    connection.query(this.text)
  }

  handleCopyData(message: { chunk: Buffer }): void {
    if (this.failure !== null) return
    try {
      this.parsed.push(message.chunk)
    } catch (error) {
      this.failure = error
    }
  }

  handleCommandComplete(): void {}

  // An error may come without a ReadyForQuery after it (a lost connection): reject at once.
  handleError(error: unknown): void {
    this.fail(error)
  }

  handleReadyForQuery(): void {
    if (this.failure !== null) this.fail(this.failure)
    else {
      try {
        this.settle(this.parsed.finish())
      } catch (error) {
        this.fail(error)
      }
    }
  }
}
