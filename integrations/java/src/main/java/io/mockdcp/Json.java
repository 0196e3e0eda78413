package io.mockdcp;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;

/**
 * The JSON mapper of the control API: answers are snake_case, the records camelCase; unknown
 * members are ignored. Its own class so that Jackson loads on the first control request, not
 * when a server starts.
 */
final class Json {

  static final ObjectMapper MAPPER = new ObjectMapper()
      .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
      .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

  private Json() {}
}
