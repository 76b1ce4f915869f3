"""Filler prose of the technical specifications: functional description, application notes, layout,
power design, thermal design, handling, firmware, reliability, compliance, test method.

No template holds a digit, a unit, a register or parameter name, an interface name, a silicon revision,
or a topic an unanswerable question asks about with a figure (CAN, USB, Ethernet, MTBF, deep power-down,
flash endurance).
"""

from __future__ import annotations

from posttrain.tasks.families.knowledge.prose import Topic, Vocabulary

_SLOTS: dict[str, tuple[str, ...]] = {
    "should": ("should", "must", "ought to"),
    "designer": ("the designer", "the system integrator", "the board designer", "the application engineer"),
    "part": ("decoupling capacitors", "the ground plane", "the crystal", "the reset line", "the supply filter",
             "the programming header", "the analog reference"),
    "goal": ("signal integrity", "low noise", "stable operation", "fast start-up", "low standby consumption",
             "robust communication", "predictable timing"),
    "condition": ("during power-up", "in noisy environments", "at the temperature extremes",
                  "when the bus is heavily loaded", "after a brown-out", "during firmware updates"),
    "place": ("close to the supply pins", "away from switching regulators", "on the same layer as the device",
              "under the exposed pad", "near the connector"),
    "feature": ("the low-power modes", "the watchdog", "the interrupt controller", "the data buffer",
                "the clock prescaler", "the general-purpose pins", "the self-test logic"),
    "source": ("the application note", "the reference design", "the evaluation kit documentation",
               "the firmware library"),
}

_TOPICS = (
    Topic(("Functional description", "Device overview", "Architecture"), (
        "{subject} integrates a sensing front end, a digital core and a serial host interface.",
        "{feature} can be configured by the host at any time through the register map.",
        "the digital core sequences measurements and stores the results in {feature}.",
        "an internal state machine handles power sequencing so that the host needs few commands.",
        "{feature} reduces the load on the host processor in typical applications.",
        "configuration changes take effect after the next measurement cycle.",
        "the architecture favours {goal} over raw throughput.",
    )),
    Topic(("Application information", "Typical application", "Design considerations"), (
        "{designer} {should} review {source} before starting a new layout.",
        "in a typical application the device sits between the sensor element and the host controller.",
        "{designer} {should} verify {goal} {condition}.",
        "unused inputs should be tied to a defined level to avoid excess current.",
        "{source} shows a complete schematic with recommended component choices.",
        "long cable runs call for additional filtering on the host side.",
    )),
    Topic(("PCB layout guidelines", "Board layout", "Layout recommendations"), (
        "{part} {should} be placed {place}.",
        "keep high-speed traces short and route them over an unbroken reference plane.",
        "{designer} {should} avoid routing sensitive signals {place}.",
        "vias in the return path increase inductance and should be kept to a minimum.",
        "good layout is the simplest way to achieve {goal}.",
        "the exposed pad, where present, {should} be soldered to ground for thermal and electrical reasons.",
    )),
    Topic(("Power supply design", "Supply considerations", "Powering the device"), (
        "a clean supply is essential for {goal}.",
        "{part} {should} be placed {place} to suppress supply ripple.",
        "{designer} {should} check the supply sequence {condition}.",
        "sharing a regulator with noisy loads can degrade measurement quality.",
        "brown-out detection holds the device in reset until the supply is valid.",
        "{feature} help reduce the average supply current in battery-powered designs.",
    )),
    Topic(("Thermal considerations", "Thermal design", "Heat dissipation"), (
        "self-heating is small in normal operation but grows with the active duty cycle.",
        "{designer} {should} keep the device away from hot components on the board.",
        "copper area connected to the exposed pad spreads heat effectively.",
        "airflow and enclosure design affect the junction temperature more than the device itself.",
        "thermal behaviour {should} be verified {condition}.",
    )),
    Topic(("Handling and storage", "ESD precautions", "Assembly"), (
        "the device is sensitive to electrostatic discharge and {should} be handled accordingly.",
        "parts {should} be stored in their original moisture barrier bags until assembly.",
        "standard lead-free reflow profiles are suitable for assembly.",
        "after exposure to humid air, parts {should} be baked before reflow.",
        "{designer} {should} follow the packaging and labelling guidance in {source}.",
    )),
    Topic(("Firmware and configuration", "Software support", "Driver integration"), (
        "{source} provides drivers for common host platforms.",
        "the host {should} read back the configuration after writing it to confirm the change.",
        "{feature} can be polled or used to raise interrupts, depending on the application.",
        "a software reset restores the default configuration without cycling power.",
        "firmware {should} handle bus errors gracefully and retry where appropriate.",
        "example code in {source} demonstrates {goal} with minimal host overhead.",
    )),
    Topic(("Quality and reliability", "Reliability", "Qualification"), (
        "the device is qualified according to the manufacturer's standard qualification plan.",
        "production testing covers the parameters marked as tested in the characteristics tables.",
        "parameters without limits are guaranteed by design and characterisation.",
        "reliability data is available from the manufacturer on request.",
        "failure analysis is offered for parts returned through the usual channels.",
    )),
    Topic(("Compliance", "Regulatory information", "Environmental compliance"), (
        "the device complies with the applicable restrictions on hazardous substances.",
        "material declarations are available from the manufacturer on request.",
        "end-product certification remains the responsibility of {designer}.",
        "the packaging materials are recyclable where local facilities exist.",
    )),
    Topic(("Test methodology", "Measurement conditions", "Characterisation"), (
        "typical values represent the centre of the distribution and are not guaranteed.",
        "limits apply over the full recommended operating range unless stated otherwise.",
        "measurements were taken with {part} fitted as in {source}.",
        "results may differ in applications that do not follow the layout guidance.",
        "characterisation covered several production lots to capture process variation.",
    )),
)

_TAILS = (
    "as described in {source}", "{condition}", "to achieve {goal}", "as shown in {source}",
    "which helps {goal}", "particularly {condition}", "without additional host software",
    "according to the guidance for {part}",
)

VOCABULARY = Vocabulary(topics=_TOPICS, slots=_SLOTS, tails=_TAILS)
