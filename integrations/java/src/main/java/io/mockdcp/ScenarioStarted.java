package io.mockdcp;

/**
 * The answer to {@code POST /mock/scenario}: the scenario is valid and runs in the background
 * ({@link MockDcpControl#awaitScenario} waits for its end).
 *
 * @param scenario its name
 * @param steps its steps
 * @param state where its progress shows ({@code /mock/state})
 */
public record ScenarioStarted(String scenario, int steps, String state) {}
