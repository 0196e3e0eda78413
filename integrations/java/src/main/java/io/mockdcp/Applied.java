package io.mockdcp;

/**
 * The answer to {@code POST /mock/steps}: every step was applied (and each wait and expect
 * step was met) before it.
 *
 * @param applied how many steps
 * @param progress the step runner's progress after them
 */
public record Applied(int applied, State.Progress progress) {}
