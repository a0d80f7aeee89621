"""Values read from text without a model: dates, periods, numbers and amounts, names, places
(jurisdictions). The answer check and the key facts both read them."""
