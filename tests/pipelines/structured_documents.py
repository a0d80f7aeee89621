"""Generated documents of each structure the key-facts readers know, every name invented: SPL
prescribing information (highlights with a boxed warning, a contents list, numbered sections,
a dosing table), an OTC Drug Facts panel, an appellate opinion whose docket number repeats as a
running header, and a contract with a preamble that gives roles, a term and an auto-renewal
clause (and a confidentiality clause that lasts five years, placed first to mislead)."""

from __future__ import annotations

SPL_PAGES = [
    "ZORVATIN- zorvatin tablet\n"
    "Example Pharma Inc.\n"
    "\n"
    "HIGHLIGHTS OF PRESCRIBING INFORMATION\n"
    "These highlights do not include all the information needed to use ZORVATIN TABLETS\n"
    "safely and effectively. See full prescribing information for ZORVATIN TABLETS.\n"
    "\n"
    "WARNING: SEVERE LIVER INJURY\n"
    "See full prescribing information for complete boxed warning.\n"
    "Zorvatin can cause severe and fatal liver injury. Check liver tests before each dose.\n"
    "(5.1)\n"
    "\n"
    "INDICATIONS AND USAGE\n"
    "Zorvatin is a kinase blocker indicated for the treatment of adults with plaque\n"
    "psoriasis. (1)\n"
    "\n"
    "DOSAGE AND ADMINISTRATION\n"
    "Adults: 10 mg orally once daily with food. (2.1)\n"
    "\n"
    "CONTRAINDICATIONS\n"
    "Severe hepatic impairment. (4)\n"
    "\n"
    "WARNINGS AND PRECAUTIONS\n"
    "Liver injury: monitor liver tests monthly. (5.1)\n"
    "\n"
    "DRUG INTERACTIONS\n"
    "Strong inhibitors of the liver enzyme raise zorvatin levels: halve the dose. (7)",
    "FULL PRESCRIBING INFORMATION: CONTENTS\n"
    "WARNING: SEVERE LIVER INJURY\n"
    "1 INDICATIONS AND USAGE\n"
    "2 DOSAGE AND ADMINISTRATION\n"
    "2.1 Recommended Dosage\n"
    "4 CONTRAINDICATIONS\n"
    "5 WARNINGS AND PRECAUTIONS\n"
    "7 DRUG INTERACTIONS\n"
    "13 NONCLINICAL TOXICOLOGY\n"
    "\n"
    "FULL PRESCRIBING INFORMATION\n"
    "WARNING: SEVERE LIVER INJURY\n"
    "Zorvatin can cause severe and fatal liver injury.\n"
    "\n"
    "1 INDICATIONS AND USAGE\n"
    "Zorvatin is indicated for the treatment of adults with moderate to severe plaque\n"
    "psoriasis who are candidates for systemic therapy.",
    "2 DOSAGE AND ADMINISTRATION\n"
    "2.1 Recommended Dosage\n"
    "Table 1. Recommended Dosage\n"
    "Psoriasis Adults 10 mg once daily\n"
    "Psoriasis Pediatric patients 6 to 17 years 5 mg once daily\n"
    "Psoriatic arthritis Adults 20 mg once daily\n"
    "\n"
    "4 CONTRAINDICATIONS\n"
    "Zorvatin is contraindicated in patients with severe hepatic impairment.\n"
    "\n"
    "5 WARNINGS AND PRECAUTIONS\n"
    "5.1 Liver Injury\n"
    "Monitor liver tests monthly and stop zorvatin if they rise above three times normal.",
    "7 DRUG INTERACTIONS\n"
    "Strong inhibitors of the liver enzyme raise zorvatin levels.\n"
    "\n"
    "13 NONCLINICAL TOXICOLOGY\n"
    "In a two-year study, mice given 50 mg/kg daily developed skin tumors at the highest\n"
    "dose given.",
]

OTC_PAGES = [
    "Drug Facts\n"
    "Active ingredient (in each tablet)\n"
    "Quellamine 25 mg\n"
    "Purpose\n"
    "Antihistamine\n"
    "Uses\n"
    "temporarily relieves sneezing and runny nose due to hay fever\n"
    "Warnings\n"
    "Sleep alert: quellamine may cause marked drowsiness. Do not drive after taking it.\n"
    "Do not use\n"
    "with any other product containing quellamine\n"
    "Ask a doctor or pharmacist before use if you are\n"
    "taking sedatives or tranquilizers",
    "Directions\n"
    "adults and children 12 years and over: take 1 tablet every 6 hours\n"
    "children under 12 years: ask a doctor\n"
    "Other information\n"
    "store at room temperature",
]

# The docket number is printed as a header on every page (OPINION_HEADER); the caption names
# the court below's docket number, the panel, and the opinion ends with a concurrence whose
# words ("I would reverse") must not be taken for the court's order.
OPINION_HEADER = "No. 21-3344"
OPINION_PAGES = [
    "United States Court of Appeals\n"
    "For the Ninth Example Circuit\n"
    "\n"
    "ORLANDO PETRAKIS-VANE,\n"
    "Plaintiff, Appellant,\n"
    "v.\n"
    "HOLLOWAY DRAINAGE DISTRICT,\n"
    "Defendant, Appellee.\n"
    "\n"
    "APPEAL FROM THE UNITED STATES DISTRICT COURT\n"
    "FOR THE DISTRICT OF EXAMPLE\n"
    "D.C. No. 4:19-cv-00817\n"
    "\n"
    "Before\n"
    "Marchetti, Chief Judge,\n"
    "Okafor and Lindqvist, Circuit Judges.\n"
    "\n"
    "Decided March 9, 2022",
    "MARCHETTI, Chief Judge. The district court dismissed the complaint for want of\n"
    "standing. We review that ruling de novo and consider the record as a whole.\n"
    "\n"
    "The plaintiff owns land beside the drainage channel and says the district's work\n"
    "flooded it twice in one year.",
    "For these reasons, we reverse the judgment and remand for further proceedings.\n"
    "\n"
    "REVERSED AND REMANDED.\n"
    "\n"
    "LINDQVIST, Circuit Judge, dissenting. I would affirm the district court.",
]

CONTRACT_PAGES = [
    "SOFTWARE LICENSE AGREEMENT\n"
    "\n"
    'This Software License Agreement (the "Agreement") is made as of June 1, 2020, by and\n'
    'between Tamarind Logic Inc., a Delaware corporation ("Licensor"), and Pellucid Freight\n'
    'LLC, an Ohio limited liability company ("Licensee").\n'
    "\n"
    "1. License. Licensor grants Licensee a license to use the Software.\n"
    "\n"
    "2. Confidentiality. The obligations of confidentiality under this Agreement shall\n"
    "continue for five (5) years after the termination of this Agreement.",
    "3. Term. The initial term of this Agreement shall commence on the Effective Date and\n"
    'shall continue for three (3) years (the "Initial Term").\n'
    "\n"
    "4. Renewal. This Agreement shall automatically renew for successive one (1) year\n"
    "periods unless either party gives written notice of non-renewal at least sixty (60)\n"
    "days before the end of the then-current term.\n"
    "\n"
    "5. Governing Law. This Agreement is governed by the laws of the State of Oregon.",
]
