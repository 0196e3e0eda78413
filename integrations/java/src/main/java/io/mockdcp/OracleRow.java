package io.mockdcp;

import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * One live document of the oracle ({@code GET /mock/oracle}): what a correct consumer holds
 * once it has every item.
 *
 * @param scope the document's scope ({@code _default})
 * @param collection its collection ({@code _default})
 * @param key its key
 * @param value the value when it is UTF-8 text, else null
 * @param valueBase64 the value, base64, when it is not UTF-8 text, else null
 * @param datatype the memcached datatype bits (1 = JSON)
 * @param flags the item flags
 * @param expiry the expiry (0 = none)
 * @param rev the revision seqno
 * @param seqno the by-seqno of its last write
 * @param vbucket its vbucket
 * @param cas its CAS, as a signed 64-bit integer
 */
public record OracleRow(
    String scope,
    String collection,
    String key,
    String value,
    String valueBase64,
    int datatype,
    long flags,
    long expiry,
    long rev,
    long seqno,
    int vbucket,
    long cas) {

  /** The value's bytes, whichever way the server sent them. */
  public byte[] bytes() {
    return value != null
        ? value.getBytes(StandardCharsets.UTF_8)
        : Base64.getDecoder().decode(valueBase64);
  }

  /** {@code scope.collection}, as the scenario vocabulary names a collection. */
  public String keyspace() {
    return scope + "." + collection;
  }
}
