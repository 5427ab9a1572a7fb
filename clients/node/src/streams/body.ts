/** Reading a request body with a size limit (413 past it, without buffering the rest). */
import { HttpError } from './headers.js'

const tooLarge = (max: number) => new HttpError(413, `The request body exceeds the server's limit of ${max} bytes.`)

export async function readBody(request: Request, maxBytes: number): Promise<Buffer> {
  const declared = request.headers.get('content-length')
  if (declared !== null && /^\d+$/.test(declared) && Number(declared) > maxBytes) throw tooLarge(maxBytes)
  if (request.body === null) return Buffer.alloc(0)
  const reader = request.body.getReader()
  const chunks: Uint8Array[] = []
  let total = 0
  for (;;) {
    let chunk
    try {
      chunk = await reader.read()
    } catch {
      // The client went away mid-body: nothing is written, and nobody is left to answer.
      throw new HttpError(400, 'The request body was cut short.')
    }
    const { done, value } = chunk
    if (done) break
    total += value.byteLength
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined)
      throw tooLarge(maxBytes)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks, total)
}
