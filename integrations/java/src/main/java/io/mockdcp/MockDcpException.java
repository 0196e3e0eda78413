package io.mockdcp;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A mockdcp server could not start, or its control API refused a request.
 *
 * <p>For a refused request, {@link #status()} is the HTTP status and {@link #problem()} the
 * RFC 9457 problem document (a bad step list: 422, with {@code errors: [{step, field, pointer,
 * detail}]}); the message has its detail and errors.
 */
public class MockDcpException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  private final int status;
  private final transient JsonNode problem;

  public MockDcpException(String message) {
    this(message, null);
  }

  public MockDcpException(String message, Throwable cause) {
    super(message, cause);
    this.status = 0;
    this.problem = null;
  }

  MockDcpException(String message, int status, JsonNode problem) {
    super(message);
    this.status = status;
    this.problem = problem;
  }

  /** The HTTP status of a refused control request, else 0. */
  public int status() {
    return status;
  }

  /** The problem document of a refused control request, else null. */
  public JsonNode problem() {
    return problem;
  }
}
