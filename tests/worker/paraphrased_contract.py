"""A generated contract whose governing-law clause shares no word with the question."""

QUESTION = "Which law governs this agreement?"
# The disputes clause names the jurisdiction without "law", "govern" or "agreement"; only the
# title and the preamble say "Agreement", so BM25 finds those and nothing else.
CONTRACT_PAGES = [
    "SUPPLY AGREEMENT\n\nThis Agreement is made between Northwind Traders Inc. and Contoso Ltd.\n\n"
    "1. Term. The contract starts on 1 March 2024 and runs for three years.\n\n"
    "2. Price. Contoso pays USD 5,000 for each delivery.\n\n"
    "3. Confidentiality. Each party keeps the terms of the contract confidential.",
    "4. Deliveries. Northwind ships the products every month.\n\n"
    "5. Disputes. Any controversy arising from this contract shall be decided under the "
    "statutes and court precedents of the Commonwealth of Pennsylvania.\n\n"
    "6. Notices. Notices are sent by registered mail to each party.",
]
