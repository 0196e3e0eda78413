package io.mockdcp;

import java.util.List;

/**
 * The outcomes of the {@code expect} steps applied so far ({@code GET /mock/expectations}).
 *
 * @param expectations one per expect step, in order
 * @param passed whether every one passed
 */
public record Expectations(List<Expectation> expectations, boolean passed) {

  /**
   * One expect step's outcome.
   *
   * @param name what it expected, e.g. {@code rollback(vbucket=0, to=5)}
   * @param passed whether it was met
   * @param detail what the server observed
   * @param step the expect step's index
   */
  public record Expectation(String name, boolean passed, String detail, int step) {}
}
