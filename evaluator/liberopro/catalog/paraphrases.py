"""Curated same-meaning rewordings of the 40 LIBERO instructions (S22 instruction paraphrase and
D20 instruction restatement). Written by hand, no model at run time; each keeps every object,
attribute and spatial relation of the original (the Spatial suite's relations are what single
out the target bowl). Keyed by LIBERO's instruction text.
"""

from __future__ import annotations

PARAPHRASES: dict[str, tuple[str, ...]] = {
    # libero_goal
    "open the middle drawer of the cabinet": (
        "pull open the cabinet's middle drawer",
        "open the drawer in the middle of the cabinet",
        "slide the middle drawer of the cabinet open",
    ),
    "put the bowl on the stove": (
        "place the bowl on top of the stove",
        "set the bowl down on the stove",
        "move the bowl onto the stove",
    ),
    "put the wine bottle on top of the cabinet": (
        "place the wine bottle on the top of the cabinet",
        "set the wine bottle down on top of the cabinet",
        "move the bottle of wine onto the cabinet's top",
    ),
    "open the top drawer and put the bowl inside": (
        "pull the top drawer open and place the bowl in it",
        "open the uppermost drawer, then put the bowl into it",
        "slide the top drawer open and set the bowl inside the drawer",
    ),
    "put the bowl on top of the cabinet": (
        "place the bowl on the top of the cabinet",
        "set the bowl down on top of the cabinet",
        "move the bowl onto the cabinet's top",
    ),
    "push the plate to the front of the stove": (
        "slide the plate over to the front of the stove",
        "push the plate until it is in front of the stove",
        "move the plate to the stove's front by pushing it",
    ),
    "put the cream cheese in the bowl": (
        "place the cream cheese inside the bowl",
        "put the cream cheese into the bowl",
        "set the cream cheese down in the bowl",
    ),
    "turn on the stove": (
        "switch the stove on",
        "switch on the stove",
        "turn the stove on",
    ),
    "put the bowl on the plate": (
        "place the bowl on top of the plate",
        "set the bowl down on the plate",
        "move the bowl onto the plate",
    ),
    "put the wine bottle on the rack": (
        "place the wine bottle on the rack",
        "set the bottle of wine on the wine rack",
        "move the wine bottle onto the rack",
    ),
    # libero_spatial
    "pick up the black bowl between the plate and the ramekin and place it on the plate": (
        "take the black bowl that sits between the plate and the ramekin and put it on the plate",
        "grab the black bowl located between the plate and the ramekin, then set it on the plate",
        "lift the black bowl between the ramekin and the plate and place it onto the plate",
    ),
    "pick up the black bowl next to the ramekin and place it on the plate": (
        "take the black bowl beside the ramekin and put it on the plate",
        "grab the black bowl that is next to the ramekin, then set it on the plate",
        "lift the black bowl by the ramekin and place it onto the plate",
    ),
    "pick up the black bowl from table center and place it on the plate": (
        "take the black bowl from the center of the table and put it on the plate",
        "grab the black bowl in the middle of the table, then set it on the plate",
        "lift the black bowl at the table's center and place it onto the plate",
    ),
    "pick up the black bowl on the cookie box and place it on the plate": (
        "take the black bowl that sits on the cookie box and put it on the plate",
        "grab the black bowl on top of the cookie box, then set it on the plate",
        "lift the black bowl off the cookie box and place it onto the plate",
    ),
    "pick up the black bowl in the top drawer of the wooden cabinet and place it on the plate": (
        "take the black bowl from the top drawer of the wooden cabinet and put it on the plate",
        "grab the black bowl inside the wooden cabinet's top drawer, then set it on the plate",
        "lift the black bowl out of the top drawer of the wooden cabinet and place it onto the plate",
    ),
    "pick up the black bowl on the ramekin and place it on the plate": (
        "take the black bowl that sits on the ramekin and put it on the plate",
        "grab the black bowl on top of the ramekin, then set it on the plate",
        "lift the black bowl off the ramekin and place it onto the plate",
    ),
    "pick up the black bowl next to the cookie box and place it on the plate": (
        "take the black bowl beside the cookie box and put it on the plate",
        "grab the black bowl that is next to the cookie box, then set it on the plate",
        "lift the black bowl by the cookie box and place it onto the plate",
    ),
    "pick up the black bowl on the stove and place it on the plate": (
        "take the black bowl that sits on the stove and put it on the plate",
        "grab the black bowl on top of the stove, then set it on the plate",
        "lift the black bowl off the stove and place it onto the plate",
    ),
    "pick up the black bowl next to the plate and place it on the plate": (
        "take the black bowl beside the plate and put it on the plate",
        "grab the black bowl that is next to the plate, then set it on the plate",
        "lift the black bowl by the plate and place it onto the plate",
    ),
    "pick up the black bowl on the wooden cabinet and place it on the plate": (
        "take the black bowl that sits on the wooden cabinet and put it on the plate",
        "grab the black bowl on top of the wooden cabinet, then set it on the plate",
        "lift the black bowl off the wooden cabinet and place it onto the plate",
    ),
    # libero_object
    "pick up the alphabet soup and place it in the basket": (
        "take the alphabet soup and put it into the basket",
        "grab the alphabet soup, then set it in the basket",
        "lift the alphabet soup and drop it into the basket",
    ),
    "pick up the cream cheese and place it in the basket": (
        "take the cream cheese and put it into the basket",
        "grab the cream cheese, then set it in the basket",
        "lift the cream cheese and drop it into the basket",
    ),
    "pick up the salad dressing and place it in the basket": (
        "take the salad dressing and put it into the basket",
        "grab the salad dressing, then set it in the basket",
        "lift the salad dressing and drop it into the basket",
    ),
    "pick up the bbq sauce and place it in the basket": (
        "take the bbq sauce and put it into the basket",
        "grab the barbecue sauce, then set it in the basket",
        "lift the bbq sauce and drop it into the basket",
    ),
    "pick up the ketchup and place it in the basket": (
        "take the ketchup and put it into the basket",
        "grab the ketchup, then set it in the basket",
        "lift the ketchup and drop it into the basket",
    ),
    "pick up the tomato sauce and place it in the basket": (
        "take the tomato sauce and put it into the basket",
        "grab the tomato sauce, then set it in the basket",
        "lift the tomato sauce and drop it into the basket",
    ),
    "pick up the butter and place it in the basket": (
        "take the butter and put it into the basket",
        "grab the butter, then set it in the basket",
        "lift the butter and drop it into the basket",
    ),
    "pick up the milk and place it in the basket": (
        "take the milk and put it into the basket",
        "grab the milk, then set it in the basket",
        "lift the milk and drop it into the basket",
    ),
    "pick up the chocolate pudding and place it in the basket": (
        "take the chocolate pudding and put it into the basket",
        "grab the chocolate pudding, then set it in the basket",
        "lift the chocolate pudding and drop it into the basket",
    ),
    "pick up the orange juice and place it in the basket": (
        "take the orange juice and put it into the basket",
        "grab the orange juice, then set it in the basket",
        "lift the orange juice and drop it into the basket",
    ),
    # libero_10
    "put both the alphabet soup and the tomato sauce in the basket": (
        "place the alphabet soup and the tomato sauce into the basket",
        "put the tomato sauce and the alphabet soup in the basket, both of them",
        "move both the alphabet soup and the tomato sauce into the basket",
    ),
    "put both the cream cheese box and the butter in the basket": (
        "place the cream cheese box and the butter into the basket",
        "put the butter and the cream cheese box in the basket, both of them",
        "move both the cream cheese box and the butter into the basket",
    ),
    "turn on the stove and put the moka pot on it": (
        "switch the stove on and place the moka pot on top of it",
        "turn the stove on, then set the moka pot on the stove",
        "switch on the stove and put the moka pot onto it",
    ),
    "put the black bowl in the bottom drawer of the cabinet and close it": (
        "place the black bowl into the cabinet's bottom drawer and then shut the drawer",
        "put the black bowl inside the bottom drawer of the cabinet, then close that drawer",
        "set the black bowl in the lowest drawer of the cabinet and push the drawer closed",
    ),
    "put the white mug on the left plate and put the yellow and white mug on the right plate": (
        "place the white mug on the plate on the left and the yellow and white mug on the plate on the right",
        "set the white mug onto the left plate, then set the yellow and white mug onto the right plate",
        "put the yellow and white mug on the right plate and the white mug on the left plate",
    ),
    "pick up the book and place it in the back compartment of the caddy": (
        "take the book and put it into the caddy's back compartment",
        "grab the book, then set it in the rear compartment of the caddy",
        "lift the book and place it into the back section of the caddy",
    ),
    "put the white mug on the plate and put the chocolate pudding to the right of the plate": (
        "place the white mug on the plate and set the chocolate pudding on the right side of the plate",
        "set the white mug onto the plate, then put the chocolate pudding to the plate's right",
        "put the chocolate pudding to the right of the plate and the white mug on the plate",
    ),
    "put both the alphabet soup and the cream cheese box in the basket": (
        "place the alphabet soup and the cream cheese box into the basket",
        "put the cream cheese box and the alphabet soup in the basket, both of them",
        "move both the alphabet soup and the cream cheese box into the basket",
    ),
    "put both moka pots on the stove": (
        "place both of the moka pots on the stove",
        "set the two moka pots down on the stove",
        "move each of the two moka pots onto the stove",
    ),
    "put the yellow and white mug in the microwave and close it": (
        "place the yellow and white mug inside the microwave and then shut it",
        "put the yellow and white mug into the microwave, then close the microwave",
        "set the yellow and white mug in the microwave and close its door",
    ),
}


def paraphrases_for(instruction: str) -> tuple[str, ...]:
    """The curated rewordings of a LIBERO instruction; ``KeyError`` if it has none."""
    try:
        return PARAPHRASES[instruction]
    except KeyError:
        raise KeyError(f"no curated paraphrase for instruction {instruction!r}") from None
